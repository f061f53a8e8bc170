import Config

extension Rule {
    /// The text a greeting or publish of this rule sends: the template when every variable it
    /// uses has a value, else the rule's `fallback` (rendered with what there is); `nil` when
    /// values are missing and there is no fallback.
    func text(_ template: String, _ values: [String: String]) -> String? {
        if Template.isComplete(template, values) { return Template.render(template, values) }
        return fallback.map { Template.render($0, values) }
    }
}
