"""Exit 1 when a Python file imports a module outside the standard library."""
import ast
import sys

tree = ast.parse(open(sys.argv[1], encoding="utf-8").read())
names = set()
for node in ast.walk(tree):
    if isinstance(node, ast.Import):
        names.update(alias.name.split(".")[0] for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        names.add(node.module.split(".")[0])
outside = sorted(n for n in names if n not in sys.stdlib_module_names)
print("non-stdlib imports:", outside)
sys.exit(1 if outside else 0)
