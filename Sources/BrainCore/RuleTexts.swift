import Config

extension Rule {
    /// The text a greeting or publish of this rule sends: the template when every variable it
    /// uses has a value, else the rule's `fallback` when every variable *it* uses has one;
    /// `nil` otherwise: a text with a hole ("Hello ! A  is on its way.") reaches no topic.
    func text(_ template: String, _ values: [String: String]) -> String? {
        if Template.isComplete(template, values) { return Template.render(template, values) }
        guard let fallback, Template.isComplete(fallback, values) else { return nil }
        return Template.render(fallback, values)
    }
}
