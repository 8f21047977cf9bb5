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
