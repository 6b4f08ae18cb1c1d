"""What a published file may name, and scorer settings refused up front (found in review of the merged scorers)."""

import pytest

from repro import card
from repro.analysis.report import primary_scorer_name
from repro.errors import ParameterError
from repro.parameters import ConstructParams, ScorerSpec, build
from repro.cli.selfcheck import render_markdown
from repro.paths import RunDir, project_root, public_name, public_text, without_folders


def test_a_local_path_is_published_by_its_last_name_only():
    assert public_name("/home/bob/models/PairRM-hf") == "PairRM-hf"
    assert public_name("~/x/dataset") == "dataset"
    assert public_name("llm-blender/PairRM-hf") == "llm-blender/PairRM-hf"



def test_a_runs_dataset_folder_is_published_with_the_runs_name(tmp_path):
    # a card of runs/demo/dataset carded from another run said "This card describes `dataset`"
    run = tmp_path / "demo"
    (run / "dataset").mkdir(parents=True)
    (run / "manifest.json").write_text("{}")
    assert public_name(str(run / "dataset")) == "demo/dataset"
    (tmp_path / "bob" / "dataset").mkdir(parents=True)  # not a run's: the folder above may be a user's name
    assert public_name(str(tmp_path / "bob" / "dataset")) == "dataset"    # the agreement block of metrics.json names the primary scorer; its table and figure are published
    assert primary_scorer_name({"model": "/home/bob/models/PairRM-hf"}) == "PairRM-hf"
    assert primary_scorer_name({"model": "builtin:tiny-pairrm"}) == "builtin:tiny-pairrm"


def test_a_local_path_inside_text_is_published_by_its_last_name_only():
    assert public_text("2 responses of ~/models/my-sft, scored by /home/alice/PairRM (C:\\Users\\al\\rm)") == \
        "2 responses of my-sft, scored by PairRM (rm)"
    kept = "chosen/rejected of HuggingFaceH4/zephyr-7b-beta, 1/2 / 3, https://huggingface.co/llm-blender/PairRM"
    assert public_text(kept) == kept


@pytest.mark.parametrize("told, shown", [
    ("file:///home/alice/models/pairrm", "pairrm"),  # a file URI, its host too
    ("file://vm/share/alice/uf.jsonl", "uf.jsonl"),
    ("file:///C:/Users/alice/uf.jsonl", "uf.jsonl"),
    ("alice@vm:/home/alice/uf.jsonl", "uf.jsonl"),  # scp's user@host: with it
    ("alice@vm:~/uf.jsonl", "uf.jsonl"),
    ("(source:/home/alice/raw/uf.jsonl)", "(source:uf.jsonl)"),  # key:/path
    ("\\\\fileserver\\share\\alice\\uf.jsonl", "uf.jsonl"),  # UNC
    ("rows 0:60 of C:\\Users\\Alice Secret\\uf.jsonl", "rows 0:60 of uf.jsonl"),  # a folder's name with a space
    ("/tmp/my data/alice-Secret/x.jsonl", "x.jsonl"),
    ("line 2 of /home/alice-Secret/Données privées/alice run:2/nan rows.jsonl: no score",
     "line 2 of nan rows.jsonl: no score"),  # (its file's own name holds a space: seen whole)
])
def test_a_path_in_any_form_is_published_by_its_last_name_only(told, shown):
    # a privacy audit: known_recipe {scorer: 'file:///home/alice/…', source: 'alice@vm:/home/alice/…'} printed whole
    # in the card; a path with a space in it was cut there (C:\Users\Alice Secret\uf.jsonl: "Alice Secret\uf.jsonl")
    assert public_text(told) == shown


def test_prose_around_a_path_is_kept_as_it_is():
    assert public_text("rows of /home/alice/uf.jsonl were scored by PairRM on 2 GPUs, then 1/2 kept") == \
        "rows of uf.jsonl were scored by PairRM on 2 GPUs, then 1/2 kept"
    assert public_text("from C:\\data\\uf.jsonl and ~/b.jsonl with chosen/rejected") == \
        "from uf.jsonl and b.jsonl with chosen/rejected"
    # two paths side by side stay two; URLs, hub ids and addresses are no local paths
    assert public_text("compare /tmp/a /tmp/b, C:\\x D:\\y or /tmp/a key:/tmp/c") == "compare a b, x y or a key:c"
    # a word with a slash after a path is prose, not more of the path (it ate "uf.jsonl chosen/"; "uf.jsonl and/or")
    assert public_text("Rows from /home/alice/uf.jsonl chosen/rejected by GPT-4, w/o ties") == \
        "Rows from uf.jsonl chosen/rejected by GPT-4, w/o ties"
    assert public_text("scored /data/uf.jsonl and/or /data/b.jsonl; C:\\data\\uf.jsonl train/test") == \
        "scored uf.jsonl and/or b.jsonl; uf.jsonl train/test"
    assert public_text("models in /home/Alice Secret/models/rm and C:\\Users\\Alice Secret\\rm then") == \
        "models in rm and rm then"  # a folder's name with a space, the path's end no file
    # ... and a folder's (a user's name there): "model Alice Smith/pairrm-hf", "saved to my runs/demo"
    assert public_text("model /home/a/Alice Smith/pairrm-hf: not found; saved to /home/a/my runs/demo (done)") == \
        "model pairrm-hf: not found; saved to demo (done)"
    kept = ("https://huggingface.co/llm-blender/PairRM, hf://datasets/o/n, http://localhost:8888/tree/home/x, "
            "mail alice@example.org: openbmb/UltraFeedback 1:2")
    assert public_text(kept) == kept


def test_a_home_folder_itself_is_published_as_a_tilde_not_by_the_users_name(tmp_path, monkeypatch):
    # "rows in /home/alice" showed "rows in alice": a home folder's last name is its user's name
    home = tmp_path / "alice-Secret"
    monkeypatch.setenv("HOME", str(home))
    assert public_text(f"rows in {home}, file://{home}/ and {home}.") == "rows in ~, ~ and ~."
    assert public_text("/home/bob: 3 files; C:\\Users\\Bob and /Users/bob.") == "~: 3 files; ~ and ~."
    assert without_folders(f"saved in {home}", home) == "saved in ~"
    assert public_text("/home/bob/uf.jsonl, /home and /data/home/x") == "uf.jsonl, home and x"  # no home folder
    # a machine that names no home folder (no HOME, the user not in the password file): Path.home() raises there
    monkeypatch.delenv("HOME")
    monkeypatch.setattr("pwd.getpwuid", lambda uid: (_ for _ in ()).throw(KeyError(uid)))
    assert public_text("rows of /data/alice/uf.jsonl") == "rows of uf.jsonl"
    assert public_name("~/uf.jsonl") == "uf.jsonl" and public_name("~") == "~"  # (raised RuntimeError)
    assert public_name("~nobody_known_here/uf.jsonl") == "uf.jsonl"  # a user this machine does not know (raised)
    assert public_name("~nobody_known_here/dataset") == "dataset"
    for bare in ("~nosuchuser", "~alice/", "~root"):  # a user's home by its name (~nosuchuser was published as is)
        assert public_name(bare) == "~" and public_name(bare + ".") == "~."
    assert public_text("card_dataset ~alice/data/mine.jsonl and /home/alice/x.jsonl") == \
        "card_dataset mine.jsonl and x.jsonl"  # (~alice/… was left whole)
    assert public_name("//home/alice") == "~"  # (a doubled slash published "alice")


def test_prose_with_a_tilde_before_a_number_is_published_as_typed_and_a_doubled_slash_home_is_hidden():
    # known_recipe and pretty_name are published through public_text: "~8/10 agreement" was read as user 8's home
    # and published as "10 agreement"; a user's name starts with a letter or "_", as POSIX names do
    for prose in ("GPT-4 ratings, ~8/10 agreement", "UltraFeedback ~60k/64k pairs", "weights ~1/3 each",
                  "temperature ~0.7/0.9", "see https://huggingface.co/llm-blender/PairRM"):
        assert public_text(prose) == prose
    assert public_text("from ~alice/data/x.jsonl, ~_svc/y.jsonl and ~/z.jsonl") == "from x.jsonl, y.jsonl and z.jsonl"
    assert public_text("path //home/alice/x.jsonl. and //home/alice") == "path x.jsonl. and ~"  # (left whole)
    assert public_name("/home/al/../alice") == "~" and public_name("/data/../home/alice") == "~"  # ("alice")
    assert public_name("~nosuchuser/../alice") == "~"  # (~ read before the ..: alice's home, not "alice")


def test_this_machines_home_is_hidden_whole_whatever_its_name_holds(tmp_path, monkeypatch):
    # a verifier: HOME ".../~ Secret 用户" was cut at its "~" (the card: "~ Secret 用户/notes"), and a path goes on past
    # one space only ("~ Pierre Dupont/models"); this machine's home is matched whole, first
    for name in ("~ Secret 用户", "Jean Pierre Dupont"):
        home = tmp_path / "home" / name
        monkeypatch.setenv("HOME", str(home))
        told = f"notes in {home}/notes, {home}/gen out/run 1/cands.jsonl, {home} and {home}."
        assert public_text(told) == "notes in notes, cands.jsonl, ~ and ~."
    # the prose after another machine's home folder or a folder is kept as typed (a reviewer: reading a name on over
    # several words published "PairRM kept at rejected by its score", "candidates from uf.jsonl")
    for prose in ("PairRM kept at {} and chosen/rejected by its score", "models under {} then ranked best/worst",
                  "copied from {} then filtered by the A/B rule"):
        assert public_text(prose.format("/home/alice")) == prose.format("~")
    assert public_text("candidates from /data/gen then rescored with PairRM into scores/uf.jsonl") == \
        "candidates from gen then rescored with PairRM into scores/uf.jsonl"
    assert public_name("/home/alice/x/..") == "~.." and public_name("~alice/../..") == "~"  # ("alice" twice)
    # another machine's user of a name in several words (a person's: capitals), WSL's /mnt/c/Users too: none of it
    for typed, shown in (("/mnt/c/Users/Jean Pierre Dupont/Downloads/uf.jsonl", "uf.jsonl"),
                         ("C:\\Users\\Jean Pierre Dupont\\data\\x.jsonl", "x.jsonl"),
                         ("/Users/José García López/models/rm then chosen/rejected", "rm then chosen/rejected"),
                         ("/mnt/c/Users/alice", "~"), ("/mnt/c/Users/alice/x/..", "~..")):
        assert public_text(typed) == shown


def test_a_home_named_in_several_words_at_a_paths_end_is_hidden_whole():
    # "saved in /Users/Alice Smith" was published "saved in ~ Smith": the name's last words leaked
    assert public_text("analysis failed: could not write /Users/Alice Smith") == "analysis failed: could not write ~"
    assert public_text("model C:\\Users\\Jean Pierre Dupont: not found; rows in /home/Mary Ann Lee.") == \
        "model ~: not found; rows in ~."
    assert public_text("saved in /Users/Alice Smith/runs/a.json now") == "saved in a.json now"
    # a sentence's end is no more of the name; a lowercase word is prose
    assert public_text("saved in /home/bob. Then 2 rows, /home/alice and chosen/rejected") == \
        "saved in ~. Then 2 rows, ~ and chosen/rejected"


def test_a_users_name_with_an_apostrophe_dot_or_hyphen_is_one_name():
    # "see /home/o'brien/x.json" was published "see ~'brien/x.json": the apostrophe ended the path
    told = ("input /home/o'brien/uf.jsonl does not exist; check C:\\Users\\o'brien\\rm, ~o'brien/b.jsonl, "
            "/home/j.doe/c.jsonl, ~jo-anne/d.jsonl and /Users/o'brien.")
    assert public_text(told) == "input uf.jsonl does not exist; check rm, b.jsonl, c.jsonl, d.jsonl and ~."
    assert public_text("source '/home/o'brien/uf.jsonl', scorer '/home/al'") == "source 'uf.jsonl', scorer '~'"


def test_a_tilde_before_one_letter_then_a_slash_and_a_number_is_prose():
    # known_recipe "about ~n/2 rows" was published "about 2 rows": read as user n's home
    for prose in ("kept about ~n/2 rows of each prompt", "ties in ~k/10 pairs", "a margin of ~x/2.5"):
        assert public_text(prose) == prose
    assert public_text("from ~bob/x.json, ~n/x.json and ~bob/2024/y.json") == "from x.json, x.json and y.json"


@pytest.mark.parametrize("told, shown", [
    # a reviewer: the name ran on over capitalised words only, and only to a separator; other homes' forms were missed
    ("/Users/Mary Ann Lee", "~"), ("C:\\Users\\Mary Ann Lee", "~"), ("/Users/Alice Smith: not found", "~: not found"),
    ("Permission denied: '/Users/Mary Ann Lee'", "Permission denied: '~'"), ("/mnt/c/Users/Mary Ann Lee", "~"),
    ("/Users/Ana de la Cruz/rm", "rm"), ("/Users/Anne-Marie van der Berg/rm", "rm"), ("/Users/Jean d'Arc/rm", "rm"),
    ("//home/Mary Ann Lee/x", "x"),
    ("\\\\server\\Users\\Mary Ann Lee\\x.jsonl", "x.jsonl"), ("/var/home/Mary Ann Lee/x.jsonl", "x.jsonl"),
    ("/Volumes/Macintosh HD/Users/Mary Ann Lee/x.jsonl", "x.jsonl"),
    # ... and at the end of a path, of these forms too; a quote, a comma or a sentence's end ends a name
    ("rows in /Users/Ana de la Cruz, /Users/Mary Ann Lee and '/home/Bob Smith'.", "rows in ~, ~ and '~'."),
    ("\\\\server\\Users\\Mary Ann Lee; /var/home/Mary Ann Lee; /Volumes/Macintosh HD/Users/Mary Ann Lee",
     "~; ~; ~"),
    ("rows in /Users/Nguyen Van An; /Users/Li An/x.jsonl", "rows in ~; x.jsonl"),  # (a capital word of a name)
    ("C:\\Users\\John Q. Public\\x.jsonl and /Users/Mary A. Lee", "x.jsonl and ~"),  # (an initial's stop: no end)
    # ... not the lowercase words after it, nor a capitalised one after a lowercase name: prose ("~ with PairRM")
    ("/Users/Ana de la Cruz kept 2 rows with PairRM; /home/alice kept In Jan",
     "~ kept 2 rows with PairRM; ~ kept In Jan"),
    ("/mnt/c/home/x and /mnt/c/Users/x", "x and ~"),  # (/mnt/c/home is no WSL home)
    # a reviewer: particles the list lacked published the surname ("~ van den Berg\\runs…", "~ ter Horst/uf.jsonl")
    ("C:\\Users\\Pieter van den Berg\\runs\\x.jsonl", "x.jsonl"), ("/Users/Maria de los Santos/x", "x"),
    ("/home/Jan ter Horst/uf.jsonl", "uf.jsonl"), ("/Users/Hans op de Beeck/zephyr-7b-sft-full", "zephyr-7b-sft-full"),
    # ... and a typographic d’ / l’, as d' and l'; a disk's name may hold a quote ("Alice’s Disk/Users/bob/x.csv")
    ("cache at /Users/Jean d’Alembert.", "cache at ~."), ("at /Users/Anna de l’Isle", "at ~"),
    ("/Volumes/Alice’s Disk/Users/bob/x.csv", "x.csv"), ("/Volumes/Alice's Disk/Users/bob/x.csv", "x.csv"),
])
def test_no_part_of_a_users_name_in_several_words_is_published_whatever_the_homes_form(told, shown):
    assert public_text(told) == shown


@pytest.mark.parametrize("told, shown", [
    # a researcher's words after a home were eaten as more of a name ("Scored on ~ GPUs", "The rows in ~"): a name
    # goes on over capitalised words only, past a lowercase particle (de, van…) only to a capitalised word
    ("Scored on /home/alice using 8 GPUs", "Scored on ~ using 8 GPUs"),
    ("The rows in /home/alice have 3 columns", "The rows in ~ have 3 columns"),
    ("Ran from /home/alice yesterday.", "Ran from ~ yesterday."), ("/home/alice 8 GPUs used", "~ 8 GPUs used"),
    ("copied to /home/alice but not to /srv", "copied to ~ but not to srv"),
    ("/Users/Alice scored 2 runs", "~ scored 2 runs"), ("/home/Alice de novo runs", "~ de novo runs"),
    ("/Users/Jean d'Arc and /Users/Anne-Marie van der Berg.", "~ and ~."),
])
def test_the_words_after_a_users_name_are_published_as_typed(told, shown):
    assert public_text(told) == shown


def test_a_tilde_before_a_word_with_no_slash_after_it_is_prose():
    # known_recipe "about ~half of the rows were dropped" and the title "UltraFeedback pairs, ~half kept" were
    # published "about ~ of the rows…", "…, ~ kept": read as user half's home
    for prose in ("about ~half of the rows were dropped", "~twenty prompts were empty", "rows scored ~equal",
                  "UltraFeedback pairs, ~half kept", "Copied from ~bob's machine"):
        assert public_text(prose) == prose
    assert public_text("saved in ~bob/. and ~bob/x.json") == "saved in ~. and x.json"


def test_a_possessive_ends_a_users_name():
    # "It's /home/alice's data" was published "It's ~", "/home/alice's A/B test" "B test"
    assert public_text("It's /home/alice's data") == "It's ~'s data"
    assert public_text("/home/alice's A/B test") == "~'s A/B test"
    assert public_text("/Users/Mary Ann Lee's runs in /home/o'sullivan/x.json") == "~'s runs in x.json"
    assert public_text("~bob's/x.json and /home/alice's/x.json") == "x.json and x.json"  # (a folder's name)
    # ... typed with a typographic apostrophe too (its "’s" was eaten with the name), which quotes a path as ' does
    assert public_text("/home/alice’s data in ‘/home/bob/x.json’ and /home/o’brien/y.json") == \
        "~’s data in ‘x.json’ and y.json"


def test_a_home_folder_in_any_of_its_forms_is_published_as_a_tilde():
    for home in ("\\\\server\\Users\\Mary Ann Lee", "//home/Mary Ann Lee", "/var/home/bob", "/mnt/c/Users/bob",
                 "/Volumes/Macintosh HD/Users/Mary Ann Lee", "/Volumes/Data/users/bob/"):
        assert public_name(home) == "~"
    assert public_name("/mnt/c/home/x") == "x" and public_name("/data/home/x") == "x"  # (a /mnt/c/home one was ~)
    for url in ("https://example.org/Users/Mary Ann Lee/x", "https://home/Mary Ann Lee/x"):  # (no local path)
        assert public_text(url) == url


@pytest.mark.parametrize("told", [
    # the prose after another user's home is kept as typed: it ate "~. See HuggingFaceH4/", "~ In Jan/"
    "scored on ~. See HuggingFaceH4/ultrafeedback_binarized for the prompts",
    "copied from ~. Then HuggingFaceH4/zephyr-7b-beta generated", "Source rows: ~. Chosen/Rejected by PairRM.",
    "Scored at ~ In Jan/Feb we filtered", "stored in ~ The Best/Worst rule", "rescored at ~: HuggingFaceH4/x then",
    "rows in ~ were scored by PairRM on 2 GPUs", "rescored at ~ with HuggingFaceH4/zephyr-7b-beta",
    "saved by ~ and Bob Smith into chosen/rejected",
])
def test_prose_after_another_users_home_is_kept_as_typed(told):
    for home in ("/home/alice", "/Users/alice", "C:\\Users\\alice"):
        assert public_text(told.replace("~", home, 1)) == told
    assert public_text(told.replace("~", "/data/alice", 1)) == told.replace("~", "alice", 1)  # (not a home)


def test_another_users_tilde_home_is_published_as_public_name_gives_it_in_selfcheck_md_too(tmp_path, monkeypatch):
    # selfcheck.md kept "~bob/models/rm" whole (it keeps this user's ~/…); ~alice with no slash is prose (~half)
    assert public_text("rows in ~alice, ~_svc. and ~bob/models/rm") == "rows in ~alice, ~_svc. and rm"
    assert public_name("~alice") == "~" and public_name("~bob/models/rm") == "rm"
    for prose in ("ties in ~8/10 pairs", "about ~n/2 rows", "about ~n rows"):
        assert public_text(prose) == prose
    monkeypatch.chdir(tmp_path)
    md = render_markdown({"verdict": "PASS", "checks": [], "rows": {"source": "~bob/data/rows.jsonl", "prompts": 3},
                          "settings": {"command": "repro selfcheck --model ~bob/models/rm --report ~/rep"}})
    assert "bob" not in md and "`repro selfcheck --model rm --report ~/rep`" in md and "3 rows from rows.jsonl;" in md


def test_this_machines_home_is_found_by_its_real_path_and_no_other_users_name_starts_with_it(tmp_path, monkeypatch):
    # the home through a link, as a tool resolving it writes it: "Jean Pierre Secret/notes" was published
    real = tmp_path / "real" / "Jean Pierre Secret"
    real.mkdir(parents=True)
    (tmp_path / "link").symlink_to(real)
    monkeypatch.setenv("HOME", str(tmp_path / "link"))
    assert public_text(f"notes in {real}/notes and {real}.") == "notes in notes and ~."
    # /home/Al is this machine's home: /home/Alice Smith is another user's whole name, not Al's home and "ice Smith"
    monkeypatch.setenv("HOME", "/home/Al")
    assert public_text("rows of /home/Alice Smith and /home/Al.") == "rows of ~ and ~."


def test_the_last_guard_names_a_path_of_this_home_or_folder_by_its_last_name(tmp_path):
    home = tmp_path / "alice Secret"
    assert without_folders(f"rows-from{home}/raw data/uf.jsonl; {home}ly/x", home) == \
        f"rows-fromuf.jsonl; {home}ly/x"  # glued to a word: missed by public_text; another folder's name kept
    assert without_folders("nothing here", home, "/") == "nothing here"


def test_selfcheck_md_names_an_input_with_a_space_in_its_folder_by_its_last_name(tmp_path, monkeypatch):
    # selfcheck.md said `--input 'Shared Data/alice-Secret/rows.jsonl'` and "3 rows from Shared Data/alice-Secret/…"
    monkeypatch.chdir(tmp_path)
    rows = "/srv/Shared Data/alice-Secret/rows.jsonl"
    md = render_markdown({"verdict": "PASS", "checks": [], "rows": {"source": rows, "prompts": 3},
                          "settings": {"command": f"repro selfcheck --input '{rows}' --report ./rep"}})
    assert "alice" not in md and "`repro selfcheck --input 'rows.jsonl' --report ./rep`" in md
    assert "3 rows from rows.jsonl;" in md


def test_a_scorer_in_a_windows_folder_is_named_by_the_folder_alone_in_the_card(tmp_path):
    # a manifest written on Windows, its card rendered elsewhere: no user name from the path
    facts = card.CardFacts(run=RunDir(tmp_path), title="t", features=None, splits=[], built_here=True, license="mit", language=["en"],
                           scorers=[{"name": "primary", "model": "llm-blender/PairRM-hf", "decides_pairs": True},
                                    {"name": "rm", "model": "C:\\Users\\alice\\models\\rm", "kind": "sequence_classifier"}])
    shown = facts.several_scorers
    assert shown["decided"]["model"] == "llm-blender/PairRM-hf" and not shown["decided"]["local"]
    assert (shown["others"][0]["model"], shown["others"][0]["local"]) == ("rm", True)


def test_a_chat_template_is_named_by_its_hash_in_the_cards_parameters():
    template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    shown = card.shaping_parameters({"scorer_options": {"chat_template": template},
                                     "scorers": [{"name": "rm", "model": "/home/bob/rm",
                                                  "options": {"chat_template": template}}]})
    for value in shown.values():  # as the card's parameter table prints them
        assert card.placeholders(card.fmt(value)) == [] and "/home/bob" not in card.fmt(value)
    assert shown["scorers"][0]["model"] == "rm" and "sha256" in shown["scorer_options"]["chat_template"]


def test_an_extra_scorers_model_follows_the_path_rule_and_its_budget_is_checked():
    spec = ScorerSpec(name="rm", model="./models/rm")
    assert spec.model == str(project_root() / "models" / "rm")
    assert ScorerSpec(name="rm", model="owner/reward-model").model == "owner/reward-model"
    with pytest.raises(ParameterError, match="batch_tokens"):
        build(ConstructParams, {"keep_all_candidates": True,
                                "scorers": [{"name": "rm", "model": "owner/rm", "batch_tokens": -5}]})


def test_pairrm_options_belong_to_their_backend():
    from repro.scorers import load_scorer

    with pytest.raises(ParameterError, match="batch_size.*backend 'repro'"):
        load_scorer("builtin:tiny-pairrm", batch_size=2)
