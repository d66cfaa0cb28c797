from iniconfig import IniConfig, ParseError
import pytest


def test_sections_and_values():
    config = IniConfig("x", data="[section]\nvalue = 1\n\n[other]\nname = a b\n")
    assert [s.name for s in config] == ["section", "other"]
    assert config["section"]["value"] == "1"
    assert config.get("other", "name") == "a b"
    assert config.get("other", "missing", default="d") == "d"
    assert config.get("section", "value", convert=int) == 1
    assert config.lineof("other", "name") == 5


def test_parse_error_names_the_line():
    with pytest.raises(ParseError) as excinfo:
        IniConfig("broken.ini", data="value = 1\n")
    assert excinfo.value.lineno == 0
