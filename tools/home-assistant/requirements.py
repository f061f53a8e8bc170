"""Prints the PyPI requirements of the integrations a Home Assistant sets up, one a line.

    python requirements.py HOMEASSISTANT_PACKAGE_DIR [DOMAIN...]

The integrations: those Home Assistant always sets up (its bootstrap's core and
default ones, the frontend among them), the DOMAINs given, and every dependency and
after-dependency of those, read from their manifest.json. scripts/home-assistant installs them, so that the
test can start Home Assistant with --skip-pip (it must not reach PyPI at run time).
"""

import ast
import json
import os
import sys

package, wanted = sys.argv[1], sys.argv[2:]
# Read from bootstrap.py's source: importing it needs the requirements not installed yet.
with open(os.path.join(package, "bootstrap.py"), encoding="utf-8") as file:
    tree = ast.parse(file.read())
always = set()
for node in tree.body:
    if isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id in ("CORE_INTEGRATIONS", "DEFAULT_INTEGRATIONS")
        for t in node.targets
    ):
        always |= ast.literal_eval(node.value)
if not always:
    sys.exit("requirements.py: no integration lists in bootstrap.py")

todo = sorted(always) + wanted
seen, requirements = set(), set()
while todo:
    domain = todo.pop()
    path = os.path.join(package, "components", domain, "manifest.json")
    if domain in seen or not os.path.exists(path):
        continue
    seen.add(domain)
    with open(path, encoding="utf-8") as file:
        manifest = json.load(file)
    requirements.update(manifest.get("requirements", []))
    # After-dependencies too: an integration may import one (analytics imports the
    # recorder's helpers, which need SQLAlchemy) even where it does not set it up.
    todo += manifest.get("dependencies", []) + manifest.get("after_dependencies", [])
print("\n".join(sorted(requirements)))
