"""A flag's history across the committed SGLang flag tables: in which releases it exists, and what it became.

A flag that one release's parser does not know is often not a typo: SGLang renames and removes flags between
releases (``--mamba-scheduler-strategy`` in 0.5.9-0.5.13 is ``--mamba-radix-cache-strategy`` in 0.5.23) and
adds new ones. :func:`explain_unknown` looks the flag up in every table (exact option or unique prefix, as
argparse resolves it) and says which: *renamed* after the last release that has it -- the release after it
has a new option of the same shape (action, nargs, type, choices) that the old one lacked, the nearest by
name -- else *removed* after it, or *added* in the first release that has it. A removed flag's suggestion is
the flag SGLang itself names as its replacement (:data:`NAMED_REPLACEMENTS`, from its deprecation texts), never
a flag of merely similar spelling when SGLang deprecated it first without naming one. Pure: tables in, words out.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from mtp_remote.lint.flag_table import FlagSpec, FlagTable, available_versions, load_flag_table, version_key


#: Flags SGLang deprecated with a named replacement, as its own text names it: flag -> (replacement, where SGLang
#: says so). A removed flag is suggested its replacement, not the nearest spelling (``--hybrid-kvcache-ratio``
#: was suggested ``--hicache-ratio``, a hierarchical-cache setting, instead of ``--swa-full-tokens-ratio``).
NAMED_REPLACEMENTS: dict[str, tuple[str, str]] = {
    "--hybrid-kvcache-ratio": ("--swa-full-tokens-ratio",
                               "SGLang 0.5.9's help: \"--hybrid-kvcache-ratio is deprecated now. Please use "
                               "--swa-full-tokens-ratio instead.\""),
}
#: SGLang's argparse actions that only warn and store nothing: a flag kept as a deprecated no-op.
_DEPRECATED_NO_OP = frozenset({"DeprecatedAction"})


@dataclass(frozen=True)
class FlagHistory:
    """What the tables say about a flag one table lacks: ``releases`` that know it (oldest first),
    ``renamed_to`` (its name in the table asked about) when it was renamed, a one-line ``message`` and the
    flag to ``suggest`` instead (the new name, or the nearest new flag of its kind), if any."""

    flag: str
    releases: tuple[str, ...]
    renamed_to: str | None
    message: str
    suggest: str | None = None


def _spec_in(table: FlagTable, flag: str) -> FlagSpec | None:
    if flag in table.by_option:
        return table.by_option[flag]
    matches = [o for o in table.options() if o.startswith(flag)]
    return table.by_option[matches[0]] if len(matches) == 1 else None


def _same_shape(a: FlagSpec, b: FlagSpec) -> bool:
    return (a.action, a.nargs, a.type) == (b.action, b.nargs, b.type) and bool(a.choices) == bool(b.choices)


def _span(releases: list[str]) -> str:
    return releases[0] if len(releases) == 1 else f"{releases[0]}-{releases[-1]}"


def _successor(old: FlagSpec, before: FlagTable, after: FlagTable) -> tuple[str | None, bool]:
    """The option of ``after`` that ``old`` (a flag of ``before``) most likely became, and whether that is
    certain enough to call a rename: a new option of ``after`` of the same shape, the nearest by name. A flag
    with choices that keeps at least half of them (``--mamba-scheduler-strategy`` ->
    ``--mamba-radix-cache-strategy``, difflib ratio >= 0.5) is a rename; a switch or value flag with the same
    default and a close name (ratio >= 0.8) is only the nearest candidate."""
    new = [s for s in after.actions
           if s.name.startswith("--") and not any(o in before.by_option for o in s.option_strings)
           and _same_shape(old, s)]
    if old.choices:
        kept = [s.name for s in new if 2 * len(set(old.choices) & set(s.choices or ())) >= len(set(old.choices))]
        close = difflib.get_close_matches(old.name, kept, n=1, cutoff=0.5)
        return (close[0], True) if close else (None, False)
    alike = [s.name for s in new if s.default == old.default]
    close = difflib.get_close_matches(old.name, alike, n=1, cutoff=0.8)
    return (close[0], False) if close else (None, False)


def explain_unknown(flag: str, table: FlagTable) -> FlagHistory | None:
    """The history of ``flag`` (a long option ``table`` does not know) in the other tables, or None when no
    table knows it (then it is a misspelling: the caller's difflib suggestion stands). Both directions: an old
    name on a newer release (renamed to ..., ``renamed_to`` the new name) and a new name on an older release
    (``renamed_to`` the old name, the one that release spells)."""
    if not flag.startswith("--"):
        return None
    versions = available_versions()
    known = [v for v in versions if _spec_in(load_flag_table(v), flag) is not None]
    if not known:
        return None
    here = version_key(table.sglang_version)
    older = [v for v in known if version_key(v) < here]
    if older and not [v for v in known if version_key(v) > here]:
        last = older[-1]
        old_spec = _spec_in(load_flag_table(last), flag)
        nxt = next(v for v in versions if version_key(v) > version_key(last))
        succ, certain = _successor(old_spec, load_flag_table(last), load_flag_table(nxt)) if old_spec else (None, False)
        if succ is not None and succ not in table.by_option:
            succ = None
        named = NAMED_REPLACEMENTS.get(old_spec.name if old_spec else flag)
        no_ops = [v for v in known if load_flag_table(v).by_option[old_spec.name].action in _DEPRECATED_NO_OP] \
            if old_spec else []
        if named and named[0] in table.by_option:
            return FlagHistory(flag, tuple(known), None,
                               f"{flag} was removed after SGLang {last} (it is a flag in {_span(known)}, not in "
                               f"{table.sglang_version}); SGLang names {named[0]} as its replacement ({named[1]})",
                               named[0])
        if no_ops and not certain:  # deprecated first, with no replacement named: a similar name is no cure
            return FlagHistory(flag, tuple(known), None,
                               f"{flag} was removed after SGLang {last} (it is a flag in {_span(known)}, not in "
                               f"{table.sglang_version}); SGLang had deprecated it (a no-op in {_span(no_ops)}) "
                               f"without naming a replacement: drop it")
        if succ and certain:
            msg = (f"{flag} was renamed {succ} after SGLang {last} (it is a flag in {_span(known)}; "
                   f"{table.sglang_version} has only the new name)")
        else:
            msg = (f"{flag} was removed or renamed after SGLang {last} (it is a flag in {_span(known)}, not in "
                   f"{table.sglang_version})" + (f"; the nearest new flag of its kind: {succ}" if succ else ""))
        return FlagHistory(flag, tuple(known), succ if certain else None, msg, succ)
    first = known[0]
    if version_key(first) > here:
        prev = [v for v in versions if version_key(v) < version_key(first)]
        new_spec = _spec_in(load_flag_table(first), flag)
        old, certain = (_successor(new_spec, load_flag_table(first), load_flag_table(prev[-1]))
                        if prev and new_spec else (None, False))
        if old is not None and old in table.by_option and certain:  # the new name of a flag this release has
            return FlagHistory(flag, tuple(known), old,
                               f"{flag} is the name from SGLang {first} on of {old} (renamed after "
                               f"{prev[-1]}); {table.sglang_version} spells it {old}", old)
        return FlagHistory(flag, tuple(known), None,
                           f"{flag} is a flag from SGLang {first} on"
                           + (f" ({_span(known)})" if len(known) > 1 else "")
                           + f"; {table.sglang_version} does not have it yet"
                           + (f" (the nearest flag of its kind here: {old})" if old in table.by_option else ""),
                           old if old in table.by_option else None)
    return FlagHistory(flag, tuple(known), None,
                       f"{flag} is a flag in SGLang {', '.join(known)}, not in {table.sglang_version}")
