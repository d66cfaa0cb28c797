"""Hidden cases for inflection.parameterize(preserve_case=...), standard library only."""
import inflection

cases = [
    (("Hello Wörld, Again!",), {"preserve_case": True}, "Hello-World-Again"),
    (("Hello Wörld, Again!", "_"), {"preserve_case": True}, "Hello_World_Again"),
    (("Hello Wörld, Again!", ""), {"preserve_case": True}, "HelloWorldAgain"),
    (("--Mixed CASE--",), {"preserve_case": True}, "Mixed-CASE"),
    (("Mixed CASE",), {}, "mixed-case"),
    (("Mixed CASE",), {"preserve_case": False}, "mixed-case"),
]
for args, kwargs, want in cases:
    got = inflection.parameterize(*args, **kwargs)
    assert got == want, (args, kwargs, got, want)
print("ok")
