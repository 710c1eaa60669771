"""A retry policy translated to another engine (spec §11): the ``Translation`` record
that ``policy.to(target)`` and ``policy_targets.translate`` return, how it shows itself
(text, and HTML in Jupyter: the target, whether its waits are WOML's, the snippet, the
warnings), and ``Translation.of``, which compares the target's waits with WOML's own
(``RetryPolicy.waits``, spec §3.1). The rules of each target are ``policy_targets``.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import Any

from .policy import RetryPolicy, format_duration

#: Two delays in seconds are the same within this (they are equal unless float rounding
#: of a 256-day wait differs in the last bit).
_REL_TOL, _ABS_TOL = 1e-12, 1e-9


@dataclass(frozen=True)
class Translation:
    """One step's retry policy in one target engine (spec §11).

    ``code`` is the snippet to paste; ``data`` the same settings as keyword arguments
    (temporal, stamina), as the ASL retrier (stepfunctions), or as
    ``{"stop"|"wait": {function: kwargs}, "reraise": True}`` (tenacity). ``delays`` are
    the target's waits in seconds before attempts 2..N; ``same`` says whether they and
    the attempt count equal WOML's (``woml_delays``); ``warnings`` say, one sentence
    each, what differs and why.
    """

    target: str
    code: str
    data: dict[str, Any]
    delays: tuple[float, ...]
    same: bool
    warnings: tuple[str, ...]
    woml_delays: tuple[float, ...] = field(default=())

    @classmethod
    def of(
        cls,
        policy: RetryPolicy,
        target: str,
        code: str,
        data: dict[str, Any],
        delays: tuple[float, ...],
        warnings: list[str],
    ) -> Translation:
        """``policy`` in ``target``: what the target's rules made of it, with ``same``
        saying whether the target's ``delays`` are WOML's own waits (spec §3.1)."""
        woml = tuple(w.total_seconds() for w in policy.waits())
        same = len(delays) == len(woml) and all(
            math.isclose(a, b, rel_tol=_REL_TOL, abs_tol=_ABS_TOL)
            for a, b in zip(delays, woml, strict=True)
        )
        return cls(target, code, data, delays, same, tuple(warnings), woml)

    def __str__(self) -> str:
        lines = [f"{self.target} · {self._verdict()}", "", self.code]
        if self.warnings:
            lines += ["", "warnings:", *(f"- {w}" for w in self.warnings)]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        esc = html.escape
        verdict = "same" if self.same else "differs"
        parts = [
            f'<div class="woml-policy-target" data-target="{esc(self.target)}" '
            f'data-same="{str(self.same).lower()}">',
            f"<p><strong>{esc(self.target)}</strong> · "
            f'<span class="woml-{verdict}">{esc(self._verdict())}</span></p>',
            f"<pre><code>{esc(self.code)}</code></pre>",
        ]
        if self.warnings:
            parts.append("<ul>" + "".join(f"<li>{esc(w)}</li>" for w in self.warnings) + "</ul>")
        parts.append("</div>")
        return "".join(parts)

    def _verdict(self) -> str:
        if self.same:
            return f"waits {_waits_text(self.delays)}, as WOML"
        return f"waits {_waits_text(self.delays)}; WOML waits {_waits_text(self.woml_delays)}"


def _waits_text(delays: tuple[float, ...]) -> str:
    return ", ".join(format_duration(d) for d in delays) if delays else "nothing (no retry)"
