"""Configuration: defaults, palace.toml, PALACE_* variables, and their validation."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from palace_retrievers import Config, ConfigError
from palace_retrievers.config import CONFIG_FILE, from_dict, load, render


def write(palace_dir: Path, text: str) -> None:
    palace_dir.mkdir(parents=True, exist_ok=True)
    (palace_dir / CONFIG_FILE).write_text(text, encoding="utf-8")


def test_defaults(tmp_path: Path) -> None:
    config = load(tmp_path, env={})
    assert config == Config()
    assert config.backend == "chroma"
    assert config.embedder == "sentence-transformers"
    assert config.model is None
    assert (config.chunking.size, config.chunking.overlap) == (800, 100)
    assert config.search.overfetch >= 1


def test_file(tmp_path: Path) -> None:
    write(
        tmp_path,
        'backend = "sqlite"\n[chunking]\nsize = 400\noverlap = 40\n'
        "[backends.chroma]\nef_search = 64\n",
    )
    config = load(tmp_path, env={})
    assert config.backend == "sqlite"
    assert (config.chunking.size, config.chunking.overlap) == (400, 40)
    assert config.backends == {"chroma": {"ef_search": 64}}
    assert config.replace(backend="chroma").backend_options() == {"ef_search": 64}


def test_env_beats_file_and_arguments_beat_env(tmp_path: Path) -> None:
    write(tmp_path, 'backend = "sqlite"\n[chunking]\nsize = 400\n')
    env = {"PALACE_BACKEND": "chroma", "PALACE_CHUNKING__SIZE": "600"}
    config = load(tmp_path, env=env)
    assert config.backend == "chroma"
    assert config.chunking.size == 600
    config = load(tmp_path, env=env, overrides={"backend": "sqlite"})
    assert config.backend == "sqlite"
    assert config.chunking.size == 600


def test_process_environment_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PALACE_SEARCH__OVERFETCH", "7")
    monkeypatch.setenv("PALACE_EMBEDDER", "fake")
    monkeypatch.setenv("PALACE_PATH", str(tmp_path / "elsewhere"))  # reserved, not a key
    monkeypatch.setenv("PALACE_PLUGINS", "")  # reserved, not a key
    config = load(tmp_path)
    assert config.search.overfetch == 7
    assert config.embedder == "fake"


def test_env_values_are_toml_literals_or_strings(tmp_path: Path) -> None:
    config = load(tmp_path, env={"PALACE_MODEL": "my model", "PALACE_MINING__BATCH_SIZE": "8"})
    assert config.model == "my model"
    assert config.mining.batch_size == 8


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("colour = 'red'\n", "'colour'"),
        ("[chunking]\nsise = 3\n", "'chunking.sise'"),
        ("[serch]\noverfetch = 3\n", "'serch'"),
    ],
)
def test_unknown_key_in_file_names_it(tmp_path: Path, text: str, key: str) -> None:
    write(tmp_path, text)
    with pytest.raises(ConfigError, match=key) as caught:
        load(tmp_path, env={})
    assert str(tmp_path / CONFIG_FILE) in str(caught.value)


def test_unknown_key_in_env_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'chunking\.colour'.*PALACE_"):
        load(tmp_path, env={"PALACE_CHUNKING__COLOUR": "red"})
    with pytest.raises(ConfigError, match="'bakend'"):
        load(tmp_path, env={"PALACE_BAKEND": "sqlite"})


def test_unknown_key_in_arguments_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'backend_name'"):
        load(tmp_path, env={}, overrides={"backend_name": "x"})


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[chunking]\nsize = "big"\n', "'chunking.size'"),
        ("[chunking]\nsize = true\n", "'chunking.size'"),
        ("[chunking]\nsize = 1.5\n", "'chunking.size'"),
        ("backend = 3\n", "'backend'"),
        ("chunking = 3\n", "'chunking'.*table"),
        ("[backends]\nchroma = 1\n", "'backends'"),
    ],
)
def test_wrong_type(tmp_path: Path, text: str, key: str) -> None:
    write(tmp_path, text)
    with pytest.raises(ConfigError, match=key):
        load(tmp_path, env={})


@pytest.mark.parametrize(
    "text",
    [
        "[chunking]\nsize = 10\n",
        "[chunking]\nsize = 100\noverlap = 50\n",
        "[chunking]\noverlap = -1\n",
        "[search]\noverfetch = 0\n",
        "[mining]\nbatch_size = 0\n",
    ],
)
def test_out_of_range(tmp_path: Path, text: str) -> None:
    write(tmp_path, text)
    with pytest.raises(ConfigError):
        load(tmp_path, env={})


@pytest.mark.parametrize("text", ["backend = \n", "[chunking\nsize = 3\n", "= 1\n"])
def test_invalid_toml(tmp_path: Path, text: str) -> None:
    write(tmp_path, text)
    with pytest.raises(ConfigError, match="not valid TOML"):
        load(tmp_path, env={})


def test_invalid_utf8(tmp_path: Path) -> None:
    tmp_path.joinpath(CONFIG_FILE).write_bytes(b'backend = "\xff"\n')
    with pytest.raises(ConfigError, match="not valid TOML"):
        load(tmp_path, env={})


def test_render_round_trips(tmp_path: Path) -> None:
    config = from_dict({"backend": "sqlite", "chunking": {"size": 500}})
    text = render(config)
    assert "# " in text  # each key documented
    tomllib.loads(text)
    write(tmp_path, text)
    assert load(tmp_path, env={}) == config


def test_render_leaves_defaults_unpinned() -> None:
    """Only keys set on purpose are settings; defaults stay comments (new defaults apply)."""
    text = render(from_dict({"backend": "sqlite", "search": {"overfetch": 4}}))
    values = tomllib.loads(text)
    assert values.pop("backend") == "sqlite"
    assert values.pop("search") == {"overfetch": 4}
    assert all(table == {} for table in values.values())
    assert '# embedder = "sentence-transformers"' in text


def test_replace_validates() -> None:
    config = Config()
    assert config.replace(backend="sqlite").backend == "sqlite"
    assert config.replace(backend=None) == config
    with pytest.raises(ConfigError, match="'backend'"):
        config.replace(backend=3)


def _number_options() -> list[tuple[str, str, str]]:
    """``(section, key, kind)`` of every float and int option, lists of them included."""
    import dataclasses
    from typing import get_type_hints

    found: list[tuple[str, str, str]] = []
    for top in dataclasses.fields(Config):
        section = top.default_factory
        if not dataclasses.is_dataclass(section):
            continue
        for name, hint in get_type_hints(section).items():
            kind = {float: "float", int: "int", list[float]: "floats"}.get(hint)
            if kind is not None:
                found.append((top.name, name, kind))
    return found


NUMBER_OPTIONS = _number_options()


def test_every_number_option_is_listed() -> None:
    """The list below is taken from the dataclasses, and holds what it should."""
    assert ("mining", "lock_timeout", "float") in NUMBER_OPTIONS
    assert ("search", "closet_boosts", "floats") in NUMBER_OPTIONS
    assert ("memory", "half_life_days", "float") in NUMBER_OPTIONS
    assert len([o for o in NUMBER_OPTIONS if o[2] != "int"]) >= 30


@pytest.mark.parametrize("literal", ["nan", "inf", "-inf", "-nan"])
@pytest.mark.parametrize(
    ("section", "key", "kind"),
    [o for o in NUMBER_OPTIONS if o[2] != "int"],
    ids=[f"{o[0]}.{o[1]}" for o in NUMBER_OPTIONS if o[2] != "int"],
)
def test_a_float_option_refuses_nan_and_infinity(
    tmp_path: Path, section: str, key: str, kind: str, literal: str
) -> None:
    """``nan`` passes every range check (each comparison with it is false) and ``inf``
    many: no float option takes either, from palace.toml or the environment."""
    value = f"[0.1, {literal}]" if kind == "floats" else literal
    write(tmp_path, f"[{section}]\n{key} = {value}\n")
    with pytest.raises(ConfigError, match=f"'{section}.{key}' in .* must be a finite number"):
        load(tmp_path, env={})
    env = {f"PALACE_{section.upper()}__{key.upper()}": value}
    with pytest.raises(ConfigError, match="must be a finite number"):
        load(tmp_path / "elsewhere", env=env)


@pytest.mark.parametrize(
    ("section", "key"),
    [o[:2] for o in NUMBER_OPTIONS if o[2] == "int"],
    ids=[f"{o[0]}.{o[1]}" for o in NUMBER_OPTIONS if o[2] == "int"],
)
def test_an_int_option_refuses_more_than_64_bits(tmp_path: Path, section: str, key: str) -> None:
    """TOML (as Python reads it) takes integers of any size; no option does."""
    write(tmp_path, f"[{section}]\n{key} = 99999999999999999999\n")
    with pytest.raises(ConfigError, match=f"'{section}.{key}' in .* is out of range"):
        load(tmp_path, env={})


def test_lock_timeout_nan_is_one_line_on_the_command_line(tmp_path: Path) -> None:
    """``lock_timeout = nan`` (or inf, or negative) in palace.toml: every command stops
    with one line and exit 1, and the palace is not touched."""
    from click.testing import CliRunner

    from palace_retrievers.cli import cli

    for literal in ("nan", "inf", "-1.0"):
        write(tmp_path, f"[mining]\nlock_timeout = {literal}\n")
        result = CliRunner().invoke(cli, ["--palace", str(tmp_path), "status"])
        assert result.exit_code == 1, result.output
        assert result.stderr.startswith("error: ")
        assert result.stderr.count("\n") == 1
        assert "mining.lock_timeout" in result.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == [CONFIG_FILE]


def test_a_folder_named_palace_toml_is_a_config_error(tmp_path: Path) -> None:
    """``palace.toml`` that is a directory: a ConfigError naming it, not IsADirectoryError."""
    (tmp_path / CONFIG_FILE).mkdir()
    with pytest.raises(ConfigError, match=r"cannot read .*palace\.toml .*must be a readable file"):
        load(tmp_path, env={})
