"""What identifies a model's weights for the reuse of old work (revisions.model_identity)."""

import shutil

from huggingface_hub import constants

from repro.revisions import model_identity


def test_model_identity_is_the_hub_commit_in_the_cache(tmp_path, monkeypatch):
    # an unpinned hub id is identified by the commit its cached files come from: a newer commit is other work
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    repo = tmp_path / "models--owner--policy"
    for commit in ("a" * 40, "b" * 40):
        (repo / "snapshots" / commit).mkdir(parents=True)
        (repo / "snapshots" / commit / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("a" * 40)
    first = model_identity("owner/policy")
    (repo / "refs" / "main").write_text("b" * 40)
    assert first == {"hub_id": "owner/policy", "commit": "a" * 40}
    assert model_identity("owner/policy") == {"hub_id": "owner/policy", "commit": "b" * 40}
    assert model_identity("owner/not-cached") == {"name": "owner/not-cached"}


def test_model_identity_of_a_folder_is_its_content_not_its_place(tmp_path):
    one = tmp_path / "one"
    one.mkdir()
    (one / "config.json").write_text('{"hidden_size": 8}')
    two = tmp_path / "elsewhere" / "two"
    shutil.copytree(one, two)
    assert model_identity(str(one)) == model_identity(str(two))
    (two / "config.json").write_text('{"hidden_size": 16}')
    assert model_identity(str(one)) != model_identity(str(two))
