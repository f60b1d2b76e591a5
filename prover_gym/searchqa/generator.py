"""Deterministic generator of the bundled Search-QA data: a fictional encyclopedia.

Countries, cities, people, organisations and works, linked by relations (born in, founded by,
headquartered in, worked for, created) and dated. Every entity gets a wiki-18-style article
(quoted title line; the first chunk repeats the title), people get two chunks, and the corpus is
salted with distractors: people share surnames, works share title words, and "event" and
"list" passages mention entities without stating the facts asked about. Because everything is
invented, a model can only answer by searching.

Questions come in the families of the paper's table, each with its gold search path (the
entity names to search, in order) and the passage that must surface for each search:

- ``single_hop``  (NQ / TriviaQA / PopQA-like): one fact of one entity;
- ``bridge``      (HotpotQA / 2Wiki-like): a fact of an entity found through another;
- ``comparison``  (HotpotQA / 2Wiki-like): compare a fact of two entities;
- ``three_hop``   (MuSiQue-like): a chain through three entities.

The split is by entity: people, works, organisations and cities are each assigned to train or
test, and a question is kept only when every entity on its path (and an entity answer) lies in
one split, so no test entity is ever seen in training questions.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass, field

GENERATOR_VERSION = 2
FAMILIES = ("single_hop", "bridge", "comparison", "three_hop")
FAMILY_ANALOGUES = {
    "single_hop": "NQ / TriviaQA / PopQA",
    "bridge": "HotpotQA / 2Wiki (bridge)",
    "comparison": "HotpotQA / 2Wiki (comparison)",
    "three_hop": "MuSiQue",
}

_ONSETS = [
    "b",
    "br",
    "c",
    "d",
    "dr",
    "f",
    "g",
    "h",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "st",
    "t",
    "th",
    "v",
    "z",
    "j",
    "w",
]
_VOWELS = ["a", "e", "i", "o", "u", "ae", "ei", "ou", "ia", "y"]
_CODAS = ["", "n", "r", "l", "s", "th", "m", "rd", "nd", "x", "k", "v"]
_COUNTRY_SUFFIX = ["ia", "land", "mark", "stan", "ora", "avia", "esh", "ania"]
_CITY_SUFFIX = ["ford", "holm", "burg", "port", "ville", "mere", "wick", "dale", "ton", "grad"]
_ORG_KINDS = [
    ("University of {c}", "university"),
    ("{n} Institute", "research institute"),
    ("{n} & Sons", "trading company"),
    ("{c} Philharmonic", "orchestra"),
    ("{n} Press", "publishing house"),
    ("{c} Observatory", "observatory"),
    ("{n} Works", "engineering firm"),
    ("{n} Gallery", "art gallery"),
]
# occupation -> (kind of work, verb, past participle, event that dates the work)
_OCCUPATIONS = {
    "novelist": ("novel", "wrote", "written", "published"),
    "poet": ("poetry collection", "wrote", "written", "published"),
    "composer": ("symphony", "composed", "composed", "first performed"),
    "painter": ("painting", "painted", "painted", "completed"),
    "film director": ("film", "directed", "directed", "released"),
    "architect": ("building", "designed", "designed", "completed"),
    "philosopher": ("treatise", "wrote", "written", "published"),
    "engineer": ("invention", "invented", "invented", "patented"),
}
_ADJ = [
    "Silent",
    "Crimson",
    "Hollow",
    "Golden",
    "Distant",
    "Broken",
    "Winter",
    "Silver",
    "Hidden",
    "Last",
    "Northern",
    "Patient",
    "Burning",
    "Quiet",
    "Iron",
    "Pale",
    "Wandering",
    "Seventh",
    "Bitter",
    "Velvet",
]
_NOUN = [
    "Harbour",
    "Orchard",
    "Lantern",
    "Meridian",
    "Cathedral",
    "Tide",
    "Archive",
    "Garden",
    "Compass",
    "Mirror",
    "Engine",
    "Bridge",
    "Sparrow",
    "Vineyard",
    "Anthem",
    "Labyrinth",
    "Monsoon",
    "Atlas",
    "Citadel",
    "Requiem",
    "Glacier",
    "Carnival",
    "Oracle",
    "Threshold",
]


@dataclass
class World:
    """The generated world the bundled questions are asked about: countries, cities, people, organisations and works,
    each a record of facts."""

    countries: list[dict] = field(default_factory=list)
    cities: list[dict] = field(default_factory=list)
    people: list[dict] = field(default_factory=list)
    orgs: list[dict] = field(default_factory=list)
    works: list[dict] = field(default_factory=list)


class _Names:
    def __init__(self, rng: random.Random):
        self.rng = rng
        self.used: set[str] = set()

    def word(self, syllables: int) -> str:
        r = self.rng
        w = "".join(r.choice(_ONSETS) + r.choice(_VOWELS) for _ in range(syllables)) + r.choice(_CODAS)
        return w.capitalize()

    def unique(self, make) -> str:
        for _ in range(1000):
            name = make()
            if name.lower() not in self.used:
                self.used.add(name.lower())
                return name
        raise RuntimeError("name space exhausted; lower the entity counts")


def build_world(
    seed: int = 0,
    *,
    n_people: int = 5000,
    n_orgs: int = 1200,
    n_works: int = 4500,
    n_cities: int = 500,
    n_countries: int = 40,
) -> World:
    """Sample the entities and relations. Deterministic in ``seed`` and the counts."""
    rng = random.Random(seed)
    names = _Names(rng)
    w = World()
    for i in range(n_countries):
        w.countries.append(
            {
                "id": f"country{i}",
                "name": names.unique(lambda: names.word(2).rstrip("aeiouy") + rng.choice(_COUNTRY_SUFFIX)),
            }
        )
    for i in range(n_cities):
        w.cities.append(
            {
                "id": f"city{i}",
                "name": names.unique(lambda: names.word(rng.choice([1, 2])) + rng.choice(_CITY_SUFFIX)),
                "country": rng.randrange(n_countries),
                "founded": rng.randrange(800, 1750),
                "river": names.word(2),
            }
        )
    first_names = [names.word(rng.choice([1, 2])) for _ in range(700)]
    surnames = [names.word(rng.choice([2, 3])) for _ in range(1400)]
    for i in range(n_people):
        occupation = rng.choice(list(_OCCUPATIONS))
        w.people.append(
            {
                "id": f"person{i}",
                "name": names.unique(lambda: f"{rng.choice(first_names)} {rng.choice(surnames)}"),
                "born": rng.randrange(1700, 1990),
                "birthplace": rng.randrange(n_cities),
                "occupation": occupation,
                "employer": None,
                "works": [],
            }
        )
    for i in range(n_orgs):
        template, kind = rng.choice(_ORG_KINDS)
        founder = rng.randrange(n_people)
        city = rng.randrange(n_cities)
        w.orgs.append(
            {
                "id": f"org{i}",
                "name": names.unique(
                    lambda: template.format(  # noqa: B023 - called right here
                        c=w.cities[rng.randrange(n_cities)]["name"],
                        n=rng.choice(surnames) if rng.random() < 0.6 else names.word(2),
                    )
                ),
                "kind": kind,
                "founder": founder,
                "hq": city,
                "founded": max(w.people[founder]["born"] + rng.randrange(22, 60), 1720),
            }
        )
    for p in w.people:
        if rng.random() < 0.7:
            p["employer"] = rng.randrange(n_orgs)
    for i in range(n_works):
        creator = rng.randrange(n_people)
        person = w.people[creator]
        kind = _OCCUPATIONS[person["occupation"]][0]
        w.works.append(
            {
                "id": f"work{i}",
                "name": names.unique(
                    lambda: rng.choice(
                        [
                            f"The {rng.choice(_ADJ)} {rng.choice(_NOUN)}",
                            f"{rng.choice(_NOUN)} of {names.word(2)}",
                            f"{rng.choice(_ADJ)} {rng.choice(_NOUN)}s",
                        ]
                    )
                ),
                "kind": kind,
                "creator": creator,
                "year": person["born"] + rng.randrange(20, 70),
            }
        )
        person["works"].append(i)
    return w


def _a(word: str) -> str:
    return "an" if word[0].lower() in "aeiou" else "a"


def _quoted(title: str) -> str:
    return '"' + title.replace('"', '""') + '"'


def render_corpus(w: World, seed: int = 0) -> tuple[list[dict], dict[str, dict[str, str]]]:
    """Render articles and distractors. Returns (rows {id, contents}, fact_passage) where
    ``fact_passage[entity_id][fact]`` is the id of the passage stating that fact."""
    rng = random.Random(seed + 1)
    rows: list[dict] = []
    facts: dict[str, dict[str, str]] = {}

    def add(title: str, text: str, entity: str | None = None, *fact_names: str) -> None:
        pid = str(len(rows))
        rows.append({"id": pid, "contents": f"{_quoted(title)}\n{text}"})
        if entity is not None:
            for f in fact_names:
                facts.setdefault(entity, {})[f] = pid

    country_name = [c["name"] for c in w.countries]
    city_name = [c["name"] for c in w.cities]
    for c in w.countries:
        capital = rng.choice([x for x in w.cities if w.countries[x["country"]] is c] or w.cities)
        add(
            c["name"],
            f"{c['name']} {c['name']} is a sovereign state whose largest city is {capital['name']}. "
            f"Its parliament meets in {capital['name']}, and its coast faces the {rng.choice(_ADJ)} Sea.",
            c["id"],
        )
    for c in w.cities:
        add(
            c["name"],
            f"{c['name']} {c['name']} is a city in {country_name[c['country']]}, on the banks of the river "
            f"{c['river']}. It was founded in {c['founded']} and is the seat of its province.",
            c["id"],
            "country",
            "founded",
        )
    for p in w.people:
        occupation = p["occupation"]
        kind, _, participle, _ = _OCCUPATIONS[occupation]
        add(
            p["name"],
            f"{p['name']} {p['name']} (born {p['born']} in {city_name[p['birthplace']]}) is {_a(occupation)} "
            f"{occupation}. {p['name'].split()[0]} grew up in "
            f"{city_name[p['birthplace']]} and trained as a {occupation} from an early age.",
            p["id"],
            "born",
            "birthplace",
        )
        career = []
        if p["employer"] is not None:
            career.append(f"{p['name']} worked for the {w.orgs[p['employer']]['name']} for most of their career.")
        else:
            career.append(f"{p['name']} worked independently and never held a permanent post.")
        if p["works"]:
            titles = ", ".join(w.works[i]["name"] for i in p["works"][:4])
            career.append(f"Among the {kind}s {participle} by {p['name']} are {titles}.")
        career.append(f"Critics have compared {p['name'].split()[-1]}'s style to that of several contemporaries.")
        add(p["name"], " ".join(career), p["id"], "employer")
    for o in w.orgs:
        founder = w.people[o["founder"]]
        add(
            o["name"],
            f"{o['name']} The {o['name']} is {_a(o['kind'])} {o['kind']} founded in {o['founded']} "
            f"by {founder['name']}. "
            f"Its headquarters are in {city_name[o['hq']]}, {country_name[w.cities[o['hq']]['country']]}.",
            o["id"],
            "founder",
            "founded",
            "hq",
        )
    for wk in w.works:
        creator = w.people[wk["creator"]]
        _, _, participle, event = _OCCUPATIONS[creator["occupation"]]
        add(
            wk["name"],
            f"{wk['name']} {wk['name']} is {_a(wk['kind'])} {wk['kind']} {participle} by {creator['name']}. "
            f"It was {event} in "
            f"{wk['year']} and is considered one of the notable {wk['kind']}s of its decade.",
            wk["id"],
            "creator",
            "year",
        )
    # distractors: events mentioning several entities without the facts asked about
    for _ in range(len(w.people) // 3):
        a, b = rng.sample(w.people, 2)
        o = rng.choice(w.orgs)
        year = rng.randrange(1750, 2000)
        add(
            f"{year} {city_name[o['hq']]} Congress",
            f"The {year} {city_name[o['hq']]} Congress was a gathering hosted by the {o['name']}. Speakers included "
            f"{a['name']} and {b['name']}, whose exchange about {rng.choice(_NOUN).lower()}s was widely reported.",
        )
    surname_groups: dict[str, list[dict]] = {}
    for p in w.people:
        surname_groups.setdefault(p["name"].split()[-1], []).append(p)
    for surname, group in sorted(surname_groups.items()):
        if len(group) >= 3:
            listed = "; ".join(f"{p['name']}, {p['occupation']}" for p in group[:8])
            add(f"{surname} (surname)", f"{surname} is a surname. Notable people with the surname include: {listed}.")
    return rows, facts


@dataclass(frozen=True)
class Candidate:
    """A question before selection: its family (single-hop, bridge, ...), text, answers, the (entity, query, fact) path
    that answers it, and the answer entity."""

    family: str
    question: str
    answers: tuple[str, ...]
    path: tuple[tuple[str, str, str], ...]  # (entity id, query text, fact name) per search
    answer_entity: str | None = None


@functools.cache
def _split_of(entity_id: str, seed: int, test_fraction: float) -> str:
    # a stable hash (Python's hash() is salted per process)
    h = 2166136261
    for ch in f"{seed}:{entity_id}":
        h = ((h ^ ord(ch)) * 16777619) & 0xFFFFFFFF
    return "test" if (h % 10_000) < test_fraction * 10_000 else "train"


def candidate_questions(w: World, seed: int = 0) -> list[Candidate]:
    """All question candidates of every family (more than needed; the caller samples)."""
    rng = random.Random(seed + 2)
    C, P, O, W = w.cities, w.people, w.orgs, w.works  # noqa: E741 - the four entity tables
    country = [c["name"] for c in w.countries]
    out: list[Candidate] = []

    def person_q(p):
        return (p["id"], p["name"], "")

    for p in P:
        out.append(
            Candidate(
                "single_hop",
                f"In which city was {p['name']} born?",
                (C[p["birthplace"]]["name"],),
                ((p["id"], p["name"], "birthplace"),),
                C[p["birthplace"]]["id"],
            )
        )
        out.append(
            Candidate(
                "single_hop", f"In what year was {p['name']} born?", (str(p["born"]),), ((p["id"], p["name"], "born"),)
            )
        )
        city = C[p["birthplace"]]
        out.append(
            Candidate(
                "bridge",
                f"In which country is the birthplace of {p['name']}?",
                (country[city["country"]],),
                ((p["id"], p["name"], "birthplace"), (city["id"], city["name"], "country")),
            )
        )
        if p["employer"] is not None:
            org = O[p["employer"]]
            out.append(
                Candidate(
                    "bridge",
                    f"In which city is the headquarters of the organisation {p['name']} worked for?",
                    (C[org["hq"]]["name"],),
                    ((p["id"], p["name"], "employer"), (org["id"], org["name"], "hq")),
                    C[org["hq"]]["id"],
                )
            )
            founder = P[org["founder"]]
            if founder is not p:
                out.append(
                    Candidate(
                        "three_hop",
                        f"In which city was the founder of the organisation {p['name']} worked for born?",
                        (C[founder["birthplace"]]["name"],),
                        (
                            (p["id"], p["name"], "employer"),
                            (org["id"], org["name"], "founder"),
                            (founder["id"], founder["name"], "birthplace"),
                        ),
                        C[founder["birthplace"]]["id"],
                    )
                )
    for o in O:
        founder = P[o["founder"]]
        out.append(
            Candidate(
                "single_hop",
                f"Who founded the {o['name']}?",
                (founder["name"],),
                ((o["id"], o["name"], "founder"),),
                founder["id"],
            )
        )
        out.append(
            Candidate(
                "single_hop",
                f"In what year was the {o['name']} founded?",
                (str(o["founded"]),),
                ((o["id"], o["name"], "founded"),),
            )
        )
        out.append(
            Candidate(
                "bridge",
                f"In what year was the founder of the {o['name']} born?",
                (str(founder["born"]),),
                ((o["id"], o["name"], "founder"), (founder["id"], founder["name"], "born")),
            )
        )
    for wk in W:
        creator = P[wk["creator"]]
        _, verb, _, event = _OCCUPATIONS[creator["occupation"]]
        out.append(
            Candidate(
                "single_hop",
                f"Who {verb} the {wk['kind']} {wk['name']}?",
                (creator["name"],),
                ((wk["id"], wk["name"], "creator"),),
                creator["id"],
            )
        )
        out.append(
            Candidate(
                "single_hop",
                f"In what year was the {wk['kind']} {wk['name']} {event}?",
                (str(wk["year"]),),
                ((wk["id"], wk["name"], "year"),),
            )
        )
        out.append(
            Candidate(
                "bridge",
                f"In what year was the creator of the {wk['kind']} {wk['name']} born?",
                (str(creator["born"]),),
                ((wk["id"], wk["name"], "creator"), (creator["id"], creator["name"], "born")),
            )
        )
        city = C[creator["birthplace"]]
        out.append(
            Candidate(
                "three_hop",
                f"In which country was the creator of the {wk['kind']} {wk['name']} born?",
                (country[city["country"]],),
                (
                    (wk["id"], wk["name"], "creator"),
                    (creator["id"], creator["name"], "birthplace"),
                    (city["id"], city["name"], "country"),
                ),
            )
        )
        if creator["employer"] is not None:
            org = O[creator["employer"]]
            out.append(
                Candidate(
                    "three_hop",
                    f"In what year was the employer of the creator of the {wk['kind']} {wk['name']} founded?",
                    (str(org["founded"]),),
                    (
                        (wk["id"], wk["name"], "creator"),
                        (creator["id"], creator["name"], "employer"),
                        (org["id"], org["name"], "founded"),
                    ),
                )
            )
    # comparisons between random pairs
    for _ in range(len(P)):
        a, b = rng.sample(P, 2)
        if a["born"] != b["born"]:
            first = a if a["born"] < b["born"] else b
            out.append(
                Candidate(
                    "comparison",
                    f"Who was born first, {a['name']} or {b['name']}?",
                    (first["name"],),
                    ((a["id"], a["name"], "born"), (b["id"], b["name"], "born")),
                )
            )
        same = a["birthplace"] == b["birthplace"]
        if same or rng.random() < 0.5:
            out.append(
                Candidate(
                    "comparison",
                    f"Were {a['name']} and {b['name']} born in the same city?",
                    ("yes" if same else "no",),
                    ((a["id"], a["name"], "birthplace"), (b["id"], b["name"], "birthplace")),
                )
            )
    for _ in range(len(O)):
        a, b = rng.sample(O, 2)
        if a["founded"] != b["founded"]:
            first = a if a["founded"] < b["founded"] else b
            out.append(
                Candidate(
                    "comparison",
                    f"Which was founded earlier, the {a['name']} or the {b['name']}?",
                    (first["name"],),
                    ((a["id"], a["name"], "founded"), (b["id"], b["name"], "founded")),
                )
            )
    return out


def assign_split(c: Candidate, seed: int, test_fraction: float) -> str | None:
    """The split every entity of the candidate lies in, or None if they straddle splits."""
    ents = [e for e, _, _ in c.path] + ([c.answer_entity] if c.answer_entity else [])
    splits = {_split_of(e, seed, test_fraction) for e in ents if not e.startswith("country")}
    return splits.pop() if len(splits) == 1 else None
