"""Varied, realistic memory sentences for the benchmarks (deterministic, seeded).

Not a benchmark itself: `latency.py` and `recall.py` import it. Sentences come
from ~30 templates of the kind agents remember (preferences, schedules,
incidents, decisions, people), with slots filled from word lists, so the
embeddings are real and spread out, with natural near-duplicates.
"""

from __future__ import annotations

import random

TOOLS = [
    "vim",
    "emacs",
    "VS Code",
    "IntelliJ",
    "tmux",
    "zsh",
    "fish",
    "bash",
    "Docker",
    "Podman",
    "Kubernetes",
    "Nomad",
    "Terraform",
    "Pulumi",
    "Ansible",
    "GitHub Actions",
    "GitLab CI",
    "Jenkins",
    "Buildkite",
    "pytest",
    "unittest",
    "Jest",
    "Vitest",
    "Poetry",
    "uv",
    "pip",
    "conda",
    "Grafana",
    "Prometheus",
    "Datadog",
    "Sentry",
    "PostgreSQL",
    "MySQL",
    "SQLite",
    "Redis",
    "Kafka",
    "RabbitMQ",
    "Celery",
    "FastAPI",
    "Django",
    "Flask",
    "aiohttp",
    "React",
    "Vue",
    "Svelte",
    "Rust",
    "Go",
    "TypeScript",
    "Python",
    "Java",
]
STYLES = [
    "tabs",
    "spaces",
    "dark mode",
    "light mode",
    "short commit messages",
    "detailed commit messages",
    "squash merges",
    "rebase merges",
    "small pull requests",
    "feature flags",
    "trunk-based development",
    "long-lived branches",
    "snake_case",
    "camelCase",
    "type hints everywhere",
    "docstrings on public APIs",
    "early returns",
    "explicit error handling",
    "pair programming",
    "async code reviews",
]
SERVICES = [
    "billing",
    "auth",
    "search",
    "checkout",
    "notifications",
    "ingest",
    "reporting",
    "gateway",
    "scheduler",
    "inventory",
    "payments",
    "analytics",
    "profile",
    "media",
    "export",
    "webhooks",
    "catalog",
    "ledger",
    "audit",
    "recommendations",
]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
TIMES = ["6am", "8am", "9:30", "noon", "2pm", "4pm", "6pm", "midnight", "11pm", "7am"]
ENVIRONMENTS = ["staging", "production", "the EU region", "the US region", "the canary pool", "dev"]
NUMBERS = ["2", "3", "5", "10", "15", "30", "45", "60", "90", "120", "250", "500"]
LANGS = ["English", "German", "Spanish", "Japanese", "French", "Portuguese"]
FOODS = ["vegetarian", "vegan", "gluten-free", "no peanuts", "halal", "kosher", "no seafood"]
FORMATS = ["Markdown", "bullet points", "a table", "plain prose", "a diagram", "a short summary"]
PEOPLE = [
    "Alice",
    "Bob",
    "Chen",
    "Dana",
    "Emeka",
    "Farah",
    "Giulia",
    "Hiro",
    "Ines",
    "Jonas",
    "Kofi",
    "Lena",
    "Mateo",
    "Nadia",
    "Oskar",
    "Priya",
    "Quinn",
    "Rosa",
    "Sven",
    "Tomoko",
]
ROLES = [
    "tech lead",
    "on-call engineer",
    "product manager",
    "security reviewer",
    "release manager",
    "database owner",
    "designer",
    "SRE",
    "team manager",
    "QA lead",
]
PROBLEMS = [
    "a memory leak",
    "slow queries",
    "a deadlock",
    "flaky tests",
    "a certificate expiry",
    "disk pressure",
    "a bad migration",
    "connection pool exhaustion",
    "a DNS outage",
    "rate limiting by a vendor",
    "a race condition",
    "clock skew",
    "a full queue",
    "an OOM kill",
]
CAUSES = [
    "a missing index",
    "an unbounded cache",
    "a retry storm",
    "a config typo",
    "an expired token",
    "a noisy neighbour",
    "a library upgrade",
    "a lock held across an await",
    "log volume",
    "a cron job overlapping itself",
    "a schema change",
    "an unpinned dependency",
]
TOPICS = [
    "the API redesign",
    "the Q3 roadmap",
    "the on-call rotation",
    "the pricing page",
    "GDPR deletion",
    "the mobile release",
    "the data retention policy",
    "the incident review",
    "the hiring plan",
    "the migration to ARM",
    "the public beta",
    "the SLA for enterprise customers",
]

TEMPLATES = [
    "user prefers {tool} over {tool2}",
    "the user likes {style} and dislikes {style2}",
    "the deploy of the {service} service happens on {day} at {time}",
    "{service} is deployed to {env} every {day}",
    "{person} is the {role} for the {service} team",
    "ask {person} before changing anything in {service}",
    "the {service} service had {problem} caused by {cause}",
    "we fixed {problem} in {service} by removing {cause}",
    "the {service} dashboard lives in {tool} and alerts go to {person}",
    "{service} tests run with {tool} and take about {n} minutes",
    "the team decided to use {tool} for {topic}",
    "meeting notes: {person} will follow up on {topic} by {day}",
    "{person} prefers answers in {format} and in {lang}",
    "for team lunches {person} needs {food} food",
    "the {service} database backup runs at {time} and keeps {n} days",
    "rollbacks of {service} in {env} take around {n} seconds",
    "{person} is out of office until {day}; {person2} covers as {role}",
    "the rate limit for {service} is {n} requests per second per tenant",
    "do not deploy {service} on {day} after {time}",
    "the build of {service} broke after {cause}; pin {tool} to the previous version",
    "{person} asked to be cc'd on anything about {topic}",
    "checkpoint: migrated {n} percent of {service} traffic to {env}",
    "summary: {topic} is blocked on {person} and the {role}",
    "the user writes {lang} and wants code comments in English",
    "the {service} queue lags by {n} seconds when {problem} happens",
    "{tool} config for {service} is in the infra repository under {service}/{env}",
    "the on-call handbook says to restart {service} before paging {person}",
    "user's favourite editor is {tool} with {style}",
    "retro: {problem} in {env} was detected after {n} minutes by {tool}",
    "the contract with the vendor for {service} renews on {day} of week {n}",
]


# Placeholders filled with two different words, then those filled with one, in the
# order the generator draws them (the same seed gives the same sentences).
PAIRED = {"tool": TOOLS, "style": STYLES, "person": PEOPLE}
SINGLE = {
    "service": SERVICES, "day": DAYS, "time": TIMES, "env": ENVIRONMENTS, "role": ROLES,
    "problem": PROBLEMS, "cause": CAUSES, "n": NUMBERS, "topic": TOPICS, "lang": LANGS,
    "food": FOODS, "format": FORMATS,
}  # fmt: skip


def _fill(template: str, rng: random.Random) -> str:
    words: dict[str, str] = {}
    for name, choices in PAIRED.items():
        words[name], words[f"{name}2"] = rng.sample(choices, 2)
    words |= {name: rng.choice(choices) for name, choices in SINGLE.items()}
    return template.format(**words)


def sentences(count: int, *, seed: int = 7, exclude: set[str] | None = None) -> list[str]:
    """`count` distinct sentences (none of them in `exclude`), the same for the same seed."""
    rng = random.Random(seed)
    seen = set(exclude or ())
    out: list[str] = []
    for _ in range(count * 20):  # bounded; duplicates are rare
        if len(out) == count:
            break
        text = _fill(rng.choice(TEMPLATES), rng)
        if text not in seen:
            seen.add(text)
            out.append(text)
    if len(out) < count:
        raise RuntimeError(f"only {len(out)} distinct sentences for {count}")
    return out


QUESTIONS = [
    "when is {service} deployed?",
    "who owns the {service} service?",
    "what editor does the user prefer?",
    "what caused {problem} in {service}?",
    "how long do {service} tests take?",
    "who should I ask about {topic}?",
    "what food does {person} need for lunch?",
    "how should answers for {person} be formatted?",
    "what is the rate limit of {service}?",
    "is {person} on vacation?",
]


def queries(count: int, *, seed: int = 99, exclude: set[str] | None = None) -> list[str]:
    """Held-out search texts: half questions, half unseen statements."""
    rng = random.Random(seed)
    half = count // 2
    asked = [_fill(rng.choice(QUESTIONS), rng) for _ in range(half)]
    return asked + sentences(count - half, seed=seed + 1, exclude=exclude)
