"""The release-keyed lint rules against the released SGLang sources that implement them.

Each rule of ``RELEASE_RULES`` names a range of releases and an anchor (text of ``server_args.py`` /
``arg_groups/`` that raises or changes the combination). For every pinned release the anchor must be in
that release's released sources exactly when the release is inside the rule's range; and the flag values a
rule reads must exist in that release's parser table (generated from the real parser). The wheels are
fetched once into ``.cache/wheels`` (``pip download --no-deps``: ~25 MB, no install); skips only when the
package registry is unreachable.
"""

from __future__ import annotations

import pytest

from mtp_remote.errors import MtpRemoteError
from mtp_remote.lint.flag_table import load_flag_table
from mtp_remote.lint.gen_flags import PINNED_VERSIONS
from mtp_remote.lint.rules import RELEASE_RULES
from mtp_remote.lint.sglang_env import registry_unreachable, released_sources

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def sources() -> dict[str, str]:
    """{version: all server_args.py + arg_groups/*.py text of that release, concatenated}."""
    out = {}
    for version in PINNED_VERSIONS:
        try:
            files = released_sources(version)
        except MtpRemoteError as exc:
            if registry_unreachable(exc):
                pytest.skip(f"package registry unreachable, cannot fetch sglang=={version}: {exc}")
            raise
        out[version] = "\n".join(files.values())
    return out


@pytest.mark.parametrize("rule", RELEASE_RULES, ids=lambda r: r.name)
@pytest.mark.parametrize("version", PINNED_VERSIONS)
def test_a_rule_applies_exactly_to_the_releases_whose_sources_implement_it(sources, rule, version):
    assert (rule.anchor in sources[version]) == rule.applies_to(version)


def test_the_strategy_values_the_rules_read_are_choices_of_those_releases_parsers():
    def choices(version: str) -> set:
        spec = load_flag_table(version).by_option.get("--mamba-scheduler-strategy")
        return set(spec.choices or ()) if spec else set()

    assert {"no_buffer", "extra_buffer"} <= choices("0.5.10")
    assert "extra_buffer_lazy" in choices("0.5.13") and "extra_buffer_lazy" not in choices("0.5.10")
    assert choices("0.5.23") == set()  # renamed to --mamba-radix-cache-strategy: no 0.5.1x rule applies
    assert "--mamba-radix-cache-strategy" in load_flag_table("0.5.23").by_option
