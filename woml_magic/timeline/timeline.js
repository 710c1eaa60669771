// The timeline's behaviour (spec §6.3): select an attempt, replay a finished run, and
// redraw a live run in the widget, on top of the static drawing of `render_html`.
//
// One source, two wrappers built by woml_magic/timeline/__init__.py (no bundler):
//   - the body of a function that the inline script after the timeline root compiles
//     (`new Function`) once per page and version, keeping the `womlTimeline` it returns
//     in a registry (`inline_script`): nothing leaks into the page, and every timeline
//     of the page calls the same `womlTimeline.fromScript(document.currentScript, id)`;
//   - the anywidget ES module (`export default { render({ model, el }) { ... } }`).
// So this file has no imports, no exports and one top-level name, `womlTimeline`.
// It is inlined in HTML: it must never contain a closing script tag or a CDATA end.
//
// Everything is scoped to one `.woml-timeline` root: several timelines on a page never
// interfere, and attaching twice to the same root returns the first controller.
// Each step's policy in other engines (spec §11) reads as four sections without this
// script; it makes them tabs.

const womlTimeline = (() => {
  "use strict";

  const PLAY_MS = 6000; // a whole replay takes this long, however long the run was
  const KEY_STEPS = 50; // arrow keys move the replay by 1/50 of the drawn axis
  const PAGE_STEPS = 10; // Page Up/Down by 1/10
  const SVG_NS = "http://www.w3.org/2000/svg";
  const DRAG_PX = 5; // a press that moves less than this is a click, not a zoom drag
  const FIT_MAX_SEGMENTS = 1500; // above this a drawing is not stretched to fill
  const LANE_CHUNK = 25; // lanes of a big saved drawing per placeholder watched for view
  const EAGER_LANES = 2 * LANE_CHUNK; // a drawing of at most this many lanes builds all
  const MAX_ZOOM = 1000; // the closest zoom: the run's axis this many times wider
  const MIN_BAR_PX = 3; // geometry.py MIN_BAR_W: the least width of a bar on screen
  const TICK_MIN_PX = 64; // geometry.py TICK_MIN_PX: the least distance between ticks
  // Tick steps in seconds, the first whose ticks stand TICK_MIN_PX apart is used.
  const TICK_STEPS = [
    0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5,
    10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
    172800, 604800,
  ];
  const RUNNING_FILL = "#1565c0"; // OUTCOME_STYLES["running"] in timeline/outcome_styles.py

  // Controls follow the front end's theme (JupyterLab's --jp-* variables) with light
  // fallbacks for pages without them; text meets WCAG AA in light and dark themes.
  const CSS = `
.woml-timeline .woml-replay:empty { display: none; }
.woml-timeline .woml-replay, .woml-widget .woml-live-bar {
  display: flex; flex-wrap: wrap; align-items: center; gap: 8px; margin: 6px 0;
  font-family: var(--jp-ui-font-family, system-ui, -apple-system, "Segoe UI", sans-serif);
  font-size: var(--jp-ui-font-size1, 13px);
  color: var(--jp-ui-font-color1, rgba(0, 0, 0, 0.87));
}
.woml-widget .woml-live-bar[hidden] { display: none; }
.woml-timeline .woml-play {
  font: inherit; width: 6.5em; padding: 2px 10px; border-radius: 3px; cursor: pointer;
  box-sizing: border-box; text-align: center; white-space: nowrap;
  color: var(--jp-ui-font-color1, rgba(0, 0, 0, 0.87));
  background: var(--jp-layout-color2, #eeeeee);
  border: 1px solid var(--jp-border-color1, #bdbdbd);
}
.woml-timeline .woml-play:hover { background: var(--jp-layout-color3, #bdbdbd); }
.woml-widget .woml-cancel {
  font: inherit; padding: 2px 10px; border-radius: 3px; cursor: pointer;
  color: #ffffff; background: #c62828; border: 1px solid #8e0000;
}
.woml-widget .woml-cancel:disabled { cursor: default; background: #6d4c41; }
.woml-timeline .woml-slider {
  width: min(420px, 60%); margin: 0; accent-color: var(--jp-brand-color1, #1976d2);
}
.woml-timeline .woml-time, .woml-timeline .woml-time-end {
  font-family: var(--jp-code-font-family, ui-monospace, monospace);
  font-variant-numeric: tabular-nums;
  color: var(--jp-ui-font-color1, rgba(0, 0, 0, 0.87));
}
.woml-timeline .woml-time { min-width: 4.5em; text-align: right; }
.woml-timeline .woml-play:focus-visible, .woml-timeline .woml-slider:focus-visible,
.woml-widget .woml-cancel:focus-visible {
  outline: 2px solid var(--jp-brand-color1, #1976d2); outline-offset: 2px;
}
.woml-timeline .woml-seg.woml-attempt, .woml-timeline tr.woml-lineage-row { cursor: pointer; }
.woml-timeline .woml-seg.woml-replay-hidden { visibility: hidden; }
.woml-timeline .woml-seg.woml-replay-running .woml-bar { fill: ${RUNNING_FILL}; }
.woml-timeline .woml-seg.woml-replay-running rect:not(.woml-bar) { visibility: hidden; }
.woml-timeline .woml-replay-cursor {
  stroke: var(--jp-brand-color1, #1976d2); stroke-width: 1.5px; pointer-events: none;
}
.woml-timeline .woml-zoom-controls { display: inline-flex; gap: 4px; }
.woml-timeline .woml-zoom-controls button {
  font: inherit; min-width: 2.2em; padding: 2px 6px; border-radius: 3px; cursor: pointer;
  color: var(--jp-ui-font-color1, rgba(0, 0, 0, 0.87));
  background: var(--jp-layout-color2, #eeeeee);
  border: 1px solid var(--jp-border-color1, #bdbdbd);
}
.woml-timeline .woml-zoom-controls button:disabled { cursor: default; opacity: 0.6; }
.woml-timeline .woml-zoom-controls button:focus-visible {
  outline: 2px solid var(--jp-brand-color1, #1976d2); outline-offset: 2px;
}
.woml-timeline svg.woml-svg.woml-zoomable { cursor: crosshair; touch-action: pan-y; }
.woml-timeline .woml-zoom-band {
  fill: var(--jp-brand-color1, #1976d2); fill-opacity: 0.15; pointer-events: none;
  stroke: var(--jp-brand-color1, #1976d2); stroke-width: 1px;
}
`;

  /** Scroll `el` (an attempt's details in the listing) into view. The listing's steps
   * are laid out only near the view (`content-visibility: auto`, timeline/html.py), each
   * counted 40 px tall until then: a step scrolled past grows to its real height while
   * a smooth scroll runs to where `el` was, so in a long listing it stopped hundreds of
   * steps short (a click on s900 of a 1,000-step run showed s334). An instant scroll
   * lands on `el` as the page is laid out then; repeated for a few frames, until the
   * steps around it have their real heights, it stays there. */
  function reveal(el) {
    let frames = 4;
    const again = () => {
      el.scrollIntoView({ block: "nearest" });
      frames -= 1;
      if (frames > 0) requestAnimationFrame(again);
    };
    again();
  }

  // --- time and the axis ----------------------------------------------------------

  /** Python's `round`: to the nearest integer, exact halves to the even one. */
  function roundEven(v) {
    const low = Math.floor(v);
    const rest = v - low; // exact for doubles
    if (rest !== 0.5) return rest < 0.5 ? low : low + 1;
    return low % 2 === 0 ? low : low + 1;
  }

  function trim(number) {
    return number.includes(".") ? number.replace(/0+$/, "").replace(/\.$/, "") : number;
  }

  /** A time or duration exactly as the axis writes it: the mirror of `format_time` in
   * timeline/axis.py (its docstring has the rules): `0s`, `0.00025s`, `12.3s`,
   * `2m 30.5s`, `1h 5s`. Same IEEE products, same half-to-even rounding. */
  function formatTime(t) {
    if (t < 0) return "-" + formatTime(-t);
    if (t === 0) return "0s";
    const ms = roundEven(t * 1000);
    if (ms === 0) {
      const decimals = 1 - Math.floor(Math.log10(t));
      return trim(t.toFixed(decimals)) + "s";
    }
    if (ms < 60000) return trim((ms / 1000).toFixed(3)) + "s";
    const tenths = roundEven(t * 10);
    if (tenths < 36000) {
      const m = Math.floor(tenths / 600);
      const rest = tenths % 600;
      return m + "m" + (rest ? " " + trim((rest / 10).toFixed(1)) + "s" : "");
    }
    const whole = roundEven(t);
    const h = Math.floor(whole / 3600);
    const m = Math.floor((whole % 3600) / 60);
    const sec = whole % 60;
    return [h + "h", ...(m ? [m + "m"] : []), ...(sec ? [sec + "s"] : [])].join(" ");
  }

  /** Piecewise-linear through `knots` ([[t, x], …], increasing), extrapolated with
   * the end slopes; `from`/`to` pick the columns (0 = time, 1 = x). */
  function through(knots, v, from, to) {
    const n = knots.length;
    if (n === 0) return v;
    if (n === 1) return knots[0][to] + (v - knots[0][from]);
    let i = 1;
    while (i < n - 1 && v > knots[i][from]) i += 1;
    const a = knots[i - 1];
    const b = knots[i];
    const span = b[from] - a[from];
    if (!(span > 0)) return v < b[from] ? a[to] : b[to];
    return a[to] + ((v - a[from]) * (b[to] - a[to])) / span;
  }

  function num(el, name, fallback) {
    const v = parseFloat(el.getAttribute(name));
    return Number.isFinite(v) ? v : fallback;
  }

  /** The svg's time→x map from its `data-axis` knots (or, lacking them, from the
   * segments' own times and positions). */
  function axisOf(svg, segs, end) {
    let knots = [];
    try {
      knots = JSON.parse((svg && svg.getAttribute("data-axis")) || "[]");
    } catch (_err) {
      knots = [];
    }
    knots = (Array.isArray(knots) ? knots : [])
      .filter((k) => Array.isArray(k) && Number.isFinite(+k[0]) && Number.isFinite(+k[1]))
      .map((k) => [+k[0], +k[1]]);
    if (knots.length === 0 && segs.length > 0) {
      const x0 = Math.min(...segs.map((s) => s.x0));
      const x1 = Math.max(...segs.map((s) => s.x1));
      knots = [[0, x0], [Math.max(end, 1e-9), x1]];
    }
    return {
      x: (t) => through(knots, t, 0, 1),
      t: (x) => through(knots, x, 1, 0),
    };
  }

  /** Where a segment's label hangs on it, in the drawing's x: its `data-anchor` (svg.py
   * `label_anchor`; every output's own script version draws its own labels, so a
   * label always has one), no layout read. */
  function anchorOf(label, x0) {
    return num(label, "data-anchor", x0);
  }

  /** Set `name` of `el` for the zoom (its drawn value kept in `data-zoom-<name>`), or
   * back to the drawn value (`value` null). */
  function zoomAttr(el, name, value) {
    const keep = "data-zoom-" + name;
    if (!el.hasAttribute(keep)) el.setAttribute(keep, el.getAttribute(name) || "");
    el.setAttribute(name, value === null ? el.getAttribute(keep) : String(value));
  }

  // --- one timeline ---------------------------------------------------------------

  function ensureStyle(container) {
    if (container.querySelector(":scope > style[data-woml-js]")) return;
    const style = document.createElement("style");
    style.setAttribute("data-woml-js", "");
    style.textContent = CSS;
    container.insertBefore(style, container.firstChild);
  }

  function segKey(el) {
    return [el.getAttribute("data-step"), el.getAttribute("data-n")];
  }

  function sameKey(el, key) {
    return (
      key !== null &&
      el.getAttribute("data-step") === key[0] &&
      el.getAttribute("data-n") === key[1]
    );
  }

  /** The bytes of base64 `text`. A plain loop: `Uint8Array.from(text, fn)` calls `fn`
   * per byte and took 0.4–0.6 s for the picture of a 1,000-step run (issue 21), this 25 ms. */
  function base64Bytes(text) {
    const bin = atob(text);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i += 1) bytes[i] = bin.charCodeAt(i);
    return bytes;
  }

  /** The text of gzipped base64 `text` (a promise; `DecompressionStream` streams it). */
  async function gunzipText(text) {
    const stream = new Blob([base64Bytes(text.trim())]).stream()
      .pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text();
  }

  /** A saved output carries its drawing as a picture (spec §6.5): `img.woml-picture`,
   * the SVG as a base64 data URI, which survives where inline SVG, styles and scripts
   * are stripped. Where this script runs, the picture becomes the inline SVG again
   * (theme colours, selectable attempts) and the note on how to get that view goes.
   * `markup` is that SVG, by default the picture's own; a big run's picture is a
   * compact image without what the live drawing needs (`picture.compact_svg`), which
   * then comes from `script.woml-drawing-data` (`drawingOf`, its lanes apart). Whether
   * the picture was replaced. */
  function adoptPicture(root, markup) {
    const img = root.querySelector("img.woml-picture");
    if (img === null) return false;
    let svg = null;
    try {
      let text = markup;
      if (text === undefined) {
        const src = img.getAttribute("src") || "";
        text = new TextDecoder().decode(base64Bytes(src.slice(src.indexOf(",") + 1)));
      }
      const holder = document.createElement("div");
      holder.innerHTML = text;
      svg = holder.querySelector("svg.woml-svg");
    } catch (_) {
      return false; // not our picture: leave it as it is
    }
    if (svg === null) return false;
    const bg = svg.querySelector(":scope > rect.woml-picture-bg");
    if (bg !== null) bg.remove(); // inline, the page's theme is the background
    img.replaceWith(svg);
    for (const note of root.querySelectorAll(".woml-shared-note")) note.remove();
    return true;
  }

  /** A promise of the live drawing for a root whose picture is compact (its
   * `script.woml-drawing-data`, `picture.drawing_data`): `{svg, lanes}`, the drawing's
   * markup without its lanes and the lanes apart (`LazyLanes`); or null: the picture is
   * the drawing, or this page cannot gunzip (the picture then stays). */
  function drawingOf(root) {
    const data = root.querySelector(":scope > script.woml-drawing-data");
    if (data === null || root.querySelector("img.woml-picture") === null) return null;
    if (typeof DecompressionStream !== "function") return null;
    return gunzipText(data.textContent).then(drawingParts);
  }

  /** The parts of a drawing's data: its first line says the length of the drawing
   * without its lanes, and each lane's `[ref, y, height, segments, length]`, the
   * markups following in that order. */
  function drawingParts(text) {
    const line = text.indexOf("\n");
    const index = JSON.parse(text.slice(0, line));
    let at = line + 1;
    const take = (length) => {
      if (!(Number.isInteger(length) && length >= 0 && at + length <= text.length)) {
        throw new Error("not a drawing's data");
      }
      at += length;
      return text.slice(at - length, at);
    };
    const svg = take(index.svg);
    const lanes = index.lanes.map((lane) => [...lane.slice(0, 4), take(lane[4])]);
    return { svg, lanes };
  }

  class Timeline {
    constructor(root, options) {
      this.root = root;
      adoptPicture(root);
      this.selected = null; // [step, n] of the selected attempt
      this.playing = false;
      this.frame = 0;
      this.listeners = [];
      const svg = root.querySelector("svg.woml-svg");
      // A big saved drawing's lanes, built as they come near the view.
      this.lazy = options.lanes && svg !== null ? new LazyLanes(this, svg, options.lanes) : null;
      if (!options.styled) ensureStyle(root);
      this.on(root, "click", (e) => this.clicked(e));
      this.on(root, "keydown", (e) => this.keyed(e));
      this.setUpTargets();
      this.finished = (root.getAttribute("data-status") || "running") !== "running";
      if (this.finished) this.setUpReplay();
      if (this.lazy !== null) this.lazy.start();
    }

    /** A lane built late (`LazyLanes`) as if it had been drawn with the others: the
     * replay at its time, the zoom applied (a selected attempt's lane is built by
     * `select`, before it marks the attempt). */
    laneBuilt(lane) {
      if (!this.segs) return; // a running run: no replay, no zoom
      const fresh = segRecords(lane);
      this.segs.push(...fresh);
      // Zoomed as drawn first (the zoom keeps the drawn attributes, `zoomAttr`), then
      // cut at the replay's t and zoomed again, as `show` does.
      if (this.transformed()) this.zoomShapes(lane);
      if (this.t < this.end) {
        this.replay(fresh, this.t);
        if (this.transformed()) this.zoomShapes(lane);
      }
    }

    /** Stop playing and remove every listener (the widget redraws a new root). */
    detach() {
      this.pause();
      for (const [target, type, fn, options] of this.listeners) {
        target.removeEventListener(type, fn, options);
      }
      this.listeners = [];
      if (this.lazy !== null) this.lazy.stop();
      if (this.resizer) this.resizer.disconnect();
      this.resizer = null;
      if (this.root._womlTimeline === this) delete this.root._womlTimeline;
    }

    own(el) {
      return el !== null && el.closest(".woml-timeline") === this.root;
    }

    // --- selection (click, Enter, Space) -----------------------------------------

    attemptOf(target) {
      const seg = target instanceof Element ? target.closest(".woml-seg.woml-attempt") : null;
      return seg !== null && this.own(seg) ? seg : null;
    }

    clicked(e) {
      const tab = this.tabOf(e.target);
      if (tab !== null) {
        this.showTarget(tab.closest("details.woml-policy-targets"), tab.dataset.target, false);
        return;
      }
      const seg = this.attemptOf(e.target);
      if (seg !== null) {
        this.toggle(seg);
        return;
      }
      // A row of the key lineage (spec §10.3) selects its attempt, in place.
      const row = e.target instanceof Element ? e.target.closest("tr.woml-lineage-row") : null;
      if (row !== null && this.own(row)) {
        this.select(sameKey(row, this.selected) ? null : segKey(row), false);
      }
    }

    keyed(e) {
      const tab = this.tabOf(e.target);
      if (tab !== null) {
        this.tabKeyed(e, tab);
        return;
      }
      if (e.key !== "Enter" && e.key !== " ") return;
      const seg = this.attemptOf(e.target);
      if (seg === null) return;
      e.preventDefault(); // Space would scroll the page
      this.toggle(seg);
    }

    toggle(seg) {
      const key = segKey(seg);
      this.select(sameKey(seg, this.selected) ? null : key, true);
    }

    /** Select attempt `key` ([step, n]) or nothing: one bar and its key lineage rows
     * marked, its details open (and scrolled to, softly, when `scroll`), the other
     * attempts' details closed. */
    select(key, scroll) {
      const before = this.selected;
      this.selected = key;
      if (key !== null && this.lazy !== null) this.lazy.buildStep(key[0]);
      let shown = null;
      for (const seg of this.root.querySelectorAll(".woml-seg.woml-attempt")) {
        if (this.own(seg)) seg.classList.toggle("woml-selected", sameKey(seg, key));
      }
      // The attempt's requests in its step's key lineage are marked too.
      for (const row of this.root.querySelectorAll("tr.woml-lineage-row")) {
        if (this.own(row)) row.classList.toggle("woml-selected", sameKey(row, key));
      }
      for (const d of this.root.querySelectorAll("details.woml-attempt-details")) {
        if (!this.own(d)) continue;
        const mine = sameKey(d, key);
        if (key !== null) d.open = mine;
        else if (sameKey(d, before)) d.open = false; // unselecting closes its details
        if (mine) shown = d;
      }
      if (shown !== null && scroll) reveal(shown);
    }

    // --- the policy in other engines: one tab per target (spec §11) -----------------

    /** Put a tab strip before the targets of each `details.woml-policy-targets`, one
     * `button.woml-target-tab` per `div.woml-policy-target` (now its tab panel), and
     * show the first. */
    setUpTargets() {
      const prefix = (this.root.id || "woml-tl") + "-target-";
      let count = 0;
      for (const box of this.root.querySelectorAll("details.woml-policy-targets")) {
        if (!this.own(box)) continue;
        // A saved copy of a page this script already filled: fill it afresh.
        for (const old of box.querySelectorAll(":scope > .woml-target-tabs")) old.remove();
        const panels = [...box.querySelectorAll(":scope > .woml-policy-target")];
        if (panels.length === 0) continue;
        const strip = document.createElement("div");
        strip.className = "woml-target-tabs";
        strip.setAttribute("role", "tablist");
        strip.setAttribute("aria-label", "Retry policy in other engines");
        for (const panel of panels) {
          count += 1;
          const tab = document.createElement("button");
          tab.type = "button";
          tab.className = "woml-target-tab";
          tab.id = prefix + count;
          tab.setAttribute("role", "tab");
          tab.dataset.target = panel.dataset.target || "";
          const name = panel.querySelector(".woml-target-name");
          const same = panel.dataset.same === "true" ? "same" : "differs";
          tab.textContent = (name ? name.textContent : tab.dataset.target) + " \u00b7 " + same;
          panel.id = prefix + count + "-panel";
          panel.setAttribute("role", "tabpanel");
          panel.setAttribute("aria-labelledby", tab.id);
          tab.setAttribute("aria-controls", panel.id);
          strip.append(tab);
        }
        panels[0].before(strip);
        this.showTarget(box, panels[0].dataset.target, false);
      }
    }

    tabOf(target) {
      const tab = target instanceof Element ? target.closest("button.woml-target-tab") : null;
      return tab !== null && this.own(tab) ? tab : null;
    }

    /** Show `target`'s panel in `box` (a `details.woml-policy-targets`), hide the others;
     * the shown tab is the one Tab reaches (and is focused when `focus`). */
    showTarget(box, target, focus) {
      if (box === null) return;
      const tabs = box.querySelectorAll(":scope > .woml-target-tabs > .woml-target-tab");
      if (![...tabs].some((t) => t.dataset.target === target)) return;
      for (const tab of tabs) {
        const mine = tab.dataset.target === target;
        tab.setAttribute("aria-selected", String(mine));
        tab.tabIndex = mine ? 0 : -1;
        if (mine && focus) tab.focus();
      }
      for (const panel of box.querySelectorAll(":scope > .woml-policy-target")) {
        panel.hidden = panel.dataset.target !== target;
      }
    }

    shownTarget(box) {
      const tab = box.querySelector(':scope > .woml-target-tabs > [aria-selected="true"]');
      return tab !== null ? tab.dataset.target : null;
    }

    /** The tab pattern's keys: arrows move to the next or previous tab (round), Home
     * and End to the first and last; the tab moved to is shown. */
    tabKeyed(e, tab) {
      const tabs = [...tab.parentElement.querySelectorAll(":scope > .woml-target-tab")];
      const i = tabs.indexOf(tab);
      const n = tabs.length;
      const to = { ArrowRight: i + 1, ArrowDown: i + 1, ArrowLeft: i - 1, ArrowUp: i - 1,
        Home: 0, End: n - 1 }[e.key];
      if (to === undefined) return;
      e.preventDefault();
      const next = tabs[(to + n) % n];
      this.showTarget(tab.closest("details.woml-policy-targets"), next.dataset.target, true);
    }

    // --- state across a live redraw ----------------------------------------------

    state() {
      const active = document.activeElement;
      let focus = null;
      if (active !== null && this.root.contains(active)) {
        const seg = active.closest(".woml-seg");
        const det = active.closest("details.woml-attempt-details");
        const targets = active.closest("details.woml-policy-targets");
        if (seg !== null) focus = ["seg", ...segKey(seg)];
        else if (det !== null) focus = ["details", ...segKey(det)];
        else if (targets !== null && active.matches("button.woml-target-tab")) {
          focus = ["tab", targets.dataset.step, active.dataset.target];
        } else if (targets !== null && active.parentElement === targets) {
          focus = ["targets", targets.dataset.step, null];
        }
      }
      const scroller = this.root.querySelector(".woml-scroll");
      return {
        selected: this.selected,
        open: [...this.root.querySelectorAll("details.woml-attempt-details")]
          .filter((d) => d.open)
          .map(segKey),
        focus,
        scrollLeft: scroller ? scroller.scrollLeft : 0,
        // Per step: its policy in other engines open or not, and the tab shown.
        targets: [...this.root.querySelectorAll("details.woml-policy-targets")].map((d) => [
          d.dataset.step,
          d.open,
          this.shownTarget(d),
        ]),
      };
    }

    restore(s) {
      if (s.selected !== null) this.select(s.selected, false);
      for (const d of this.root.querySelectorAll("details.woml-attempt-details")) {
        if (s.open.some((k) => sameKey(d, k))) d.open = true;
      }
      for (const d of this.root.querySelectorAll("details.woml-policy-targets")) {
        const was = (s.targets || []).find(([step]) => step === d.dataset.step);
        if (was === undefined) continue;
        d.open = was[1];
        if (was[2] !== null) this.showTarget(d, was[2], false);
      }
      const scroller = this.root.querySelector(".woml-scroll");
      if (scroller) scroller.scrollLeft = s.scrollLeft;
      if (s.focus !== null && (s.focus[0] === "tab" || s.focus[0] === "targets")) {
        const [kind, step, target] = s.focus;
        for (const d of this.root.querySelectorAll("details.woml-policy-targets")) {
          if (d.dataset.step !== step) continue;
          const el = kind === "tab"
            ? [...d.querySelectorAll("button.woml-target-tab")].find(
                (t) => t.dataset.target === target)
            : d.querySelector(":scope > summary");
          if (el) el.focus({ preventScroll: true });
          break;
        }
      } else if (s.focus !== null) {
        const [kind, step, n] = s.focus;
        // Only attempts take focus (a wait shares its attempt's data-n).
        const sel = kind === "seg" ? ".woml-seg[tabindex]" : "details.woml-attempt-details > summary";
        for (const el of this.root.querySelectorAll(sel)) {
          const host = kind === "seg" ? el : el.parentElement;
          if (sameKey(host, [step, n])) {
            el.focus({ preventScroll: true });
            break;
          }
        }
      }
    }

    // --- replay (finished runs) ----------------------------------------------------

    setUpReplay() {
      const root = this.root;
      const box = root.querySelector(".woml-replay");
      this.svg = root.querySelector("svg.woml-svg");
      if (box === null || this.svg === null) return;
      this.segs = segRecords(this.svg);
      // Every segment, built or not: what decides whether the drawing is stretched.
      this.segCount = this.segs.length + (this.lazy !== null ? this.lazy.total : 0);
      const latest = Math.max(0, ...this.segs.map((s) => s.t1));
      this.end = num(root, "data-end", latest);
      this.axis = axisOf(this.svg, this.segs, this.end);
      this.xStart = this.axis.x(0);
      this.xEnd = this.axis.x(this.end);

      // A saved copy of a page this script already filled: fill it afresh.
      box.textContent = "";
      for (const old of root.querySelectorAll(".woml-replay-at, .woml-replay-cursor")) {
        if (this.own(old)) old.remove();
      }
      const play = document.createElement("button");
      play.type = "button";
      play.className = "woml-play";
      const slider = document.createElement("input");
      slider.type = "range";
      slider.className = "woml-slider";
      slider.min = "0";
      slider.max = String(this.end);
      slider.step = "any";
      slider.setAttribute("aria-label", "replay time");
      const time = document.createElement("span");
      time.className = "woml-time";
      const of = document.createElement("span");
      of.className = "woml-time-end";
      of.textContent = "of " + formatTime(this.end);
      box.append(play, slider, time, of);
      this.play = play;
      this.slider = slider;
      this.time = time;

      const header = root.querySelector(".woml-header");
      this.at = document.createElement("span");
      this.at.className = "woml-replay-at";
      if (header !== null) header.append(this.at);
      this.cursor = document.createElementNS(SVG_NS, "line");
      this.cursor.setAttribute("class", "woml-replay-cursor");
      this.svg.append(this.cursor);

      this.on(play, "click", () => (this.playing ? this.pause() : this.start()));
      this.on(slider, "input", () => {
        this.pause();
        this.show(parseFloat(slider.value));
      });
      this.on(slider, "keydown", (e) => this.slid(e));
      this.setUpZoom(box);
      this.showPlaying();
      this.show(this.end);
    }

    // --- zoom and pan on the time axis (finished runs, spec §6.3) --------------------
    //
    // The track's content (ticks, breaks, marks, the lanes' bars, waits and labels) is
    // moved into `g.woml-zoom` inside `g.woml-zoom-clip`; zooming sets an x-only affine
    // transform on it, the clip keeps it off the step column. Every text (and an inside
    // label's plate, a break's zig-zag) is scaled back about an anchor on its segment,
    // so it keeps its size and its place beside, inside or above its bar; a bar keeps
    // its least width on screen; the axis gets ticks of its own for the window shown.

    setUpZoom(box) {
      const svg = this.svg;
      this.zoomK = 1; // how much closer than the whole run the window is
      this.fit = 1; // how much wider than drawn the track is, to fill the output
      this.zx0 = this.xStart;
      this.zx1 = this.xEnd;
      if (!(this.xEnd > this.xStart)) return;
      this.naturalW = num(svg, "width", 0);
      const controls = document.createElement("span");
      controls.className = "woml-zoom-controls";
      controls.setAttribute("role", "group");
      controls.setAttribute("aria-label", "zoom the time axis");
      const button = (text, label, fn) => {
        const b = document.createElement("button");
        b.type = "button";
        b.textContent = text;
        b.setAttribute("aria-label", label);
        b.title = label;
        this.on(b, "click", fn);
        controls.append(b);
        return b;
      };
      this.zoomIn = button("+", "zoom in", () => this.zoomBy(0.5));
      this.zoomOut = button("\u2212", "zoom out", () => this.zoomBy(2));
      this.panLeft = button("\u25c0", "earlier", () => this.panBy(-0.5));
      this.panRight = button("\u25b6", "later", () => this.panBy(0.5));
      this.zoomReset = button("reset zoom", "reset zoom (or double-click the drawing)", () =>
        this.zoomTo(this.xStart, this.xEnd),
      );
      box.append(controls);
      svg.classList.add("woml-zoomable");
      this.on(svg, "pointerdown", (e) => this.dragStart(e));
      this.on(svg, "pointermove", (e) => this.dragMove(e));
      this.on(svg, "pointerup", (e) => this.dragEnd(e));
      this.on(svg, "pointercancel", () => this.dragCancel());
      this.on(svg, "dblclick", (e) => {
        e.preventDefault();
        this.zoomTo(this.xStart, this.xEnd);
      });
      this.on(svg, "wheel", (e) => this.wheeled(e), { passive: false });
      // A drag ends in a click on whatever it started on: not a selection.
      this.on(svg, "click", (e) => {
        if (this.dragged) {
          e.stopPropagation();
          e.preventDefault();
          this.dragged = false;
        }
      }, true);
      this.zoomButtons();
      this.fitWidth();
      if (typeof ResizeObserver !== "undefined" && svg.parentElement) {
        this.resizer = new ResizeObserver(() => this.fitWidth());
        this.resizer.observe(svg.parentElement);
      }
    }

    /** The drawing fills its output's width (spec §6.3): where the output is wider
     * than the drawing, the track is stretched (text keeps its size); where it is
     * narrower, the drawing keeps its size and scrolls sideways. Again on a resize. */
    fitWidth() {
      const holder = this.svg.parentElement;
      if (!holder || !this.naturalW) return;
      // A very big drawing keeps its drawn width: restyling thousands of segments at
      // load (and on every resize) would cost more than the stretch is worth.
      if (this.segCount > FIT_MAX_SEGMENTS) return;
      const extra = Math.max(0, Math.floor(holder.clientWidth - this.naturalW));
      const track = this.xEnd - this.xStart;
      const fit = (track + extra) / track;
      if (Math.abs(fit - this.fit) < 1e-6) return;
      this.fit = fit;
      const width = this.naturalW + extra;
      this.svg.setAttribute("width", String(width));
      this.svg.setAttribute("viewBox", `0 0 ${width} ${this.svgHeight()}`);
      this.drawZoom();
    }

    /** How many screen px a px of the unzoomed drawing's track takes now. */
    scale() {
      return this.zoomK * this.fit;
    }

    /** Whether the track is drawn other than as laid out: zoomed in, or stretched. */
    transformed() {
      return this.fit !== undefined && Math.abs(this.scale() - 1) > 1e-9;
    }

    on(target, type, fn, options) {
      target.addEventListener(type, fn, options);
      this.listeners.push([target, type, fn, options]);
    }

    /** The local x (the unzoomed drawing's) under the pointer. */
    localX(e) {
      const ctm = this.svg.getScreenCTM();
      if (!ctm) return null;
      const outer = (e.clientX - ctm.e) / ctm.a;
      return this.zx0 + (outer - this.xStart) / this.scale();
    }

    outerX(x) {
      return this.xStart + (x - this.zx0) * this.scale();
    }

    dragStart(e) {
      if (e.button !== 0) return;
      const x = this.localX(e);
      if (x === null) return;
      this.drag = { x, clientX: e.clientX, band: null, id: e.pointerId };
      this.dragged = false;
    }

    dragMove(e) {
      const d = this.drag;
      if (!d) return;
      if (!d.band && Math.abs(e.clientX - d.clientX) < DRAG_PX) return;
      if (!d.band) {
        try {
          this.svg.setPointerCapture(d.id);
        } catch (_err) {
          // not capturable (a synthetic event): the drag still works over the drawing
        }
        d.band = document.createElementNS(SVG_NS, "rect");
        d.band.setAttribute("class", "woml-zoom-band");
        d.band.setAttribute("y", "0");
        d.band.setAttribute("height", String(this.svgHeight()));
        this.svg.append(d.band);
      }
      const x = this.localX(e);
      if (x === null) return;
      const a = this.outerX(Math.min(d.x, x));
      const b = this.outerX(Math.max(d.x, x));
      d.band.setAttribute("x", String(a));
      d.band.setAttribute("width", String(b - a));
      d.to = x;
    }

    dragEnd(e) {
      const d = this.drag;
      this.drag = null;
      if (!d || !d.band) return;
      d.band.remove();
      this.dragged = true;
      const x = this.localX(e);
      const to = x === null ? d.to : x;
      if (to !== undefined) this.zoomTo(Math.min(d.x, to), Math.max(d.x, to));
    }

    dragCancel() {
      if (this.drag && this.drag.band) this.drag.band.remove();
      this.drag = null;
    }

    wheeled(e) {
      if (this.zoomK <= 1) return; // nothing to pan: let the page scroll
      const dx = Math.abs(e.deltaX) > Math.abs(e.deltaY) ? e.deltaX : e.shiftKey ? e.deltaY : 0;
      if (dx === 0) return;
      e.preventDefault();
      this.panTo(this.zx0 + dx / this.scale());
    }

    svgHeight() {
      const box = this.svg.viewBox && this.svg.viewBox.baseVal;
      return box && box.height ? box.height : num(this.svg, "height", 0);
    }

    /** Zoom the window by `factor` (0.5: twice as close) about its middle. */
    zoomBy(factor) {
      const mid = (this.zx0 + this.zx1) / 2;
      const half = ((this.zx1 - this.zx0) * factor) / 2;
      this.zoomTo(mid - half, mid + half);
    }

    /** Move the window by `share` of its width (negative: earlier). */
    panBy(share) {
      this.panTo(this.zx0 + (this.zx1 - this.zx0) * share);
    }

    panTo(x0) {
      const w = this.zx1 - this.zx0;
      const a = Math.min(Math.max(this.xStart, x0), this.xEnd - w);
      this.zoomTo(a, a + w);
    }

    /** Show the run's times from `t0` to `t1` across the whole track. */
    zoomTime(t0, t1) {
      this.zoomTo(this.axis.x(t0), this.axis.x(t1));
    }

    /** Show local x from `a` to `b` across the track (clamped to the run, at most
     * MAX_ZOOM times closer). */
    zoomTo(a, b) {
      const full = this.xEnd - this.xStart;
      let w = Math.max(b - a, full / MAX_ZOOM);
      if (!(w < full - 0.01)) {
        a = this.xStart;
        w = full;
      }
      a = Math.min(Math.max(this.xStart, a), this.xEnd - w);
      this.zx0 = a;
      this.zx1 = a + w;
      this.zoomK = full / w;
      this.drawZoom();
      this.zoomButtons();
    }

    zoomButtons() {
      if (!this.zoomIn) return;
      const zoomed = this.zoomK > 1;
      this.zoomOut.disabled = !zoomed;
      this.zoomReset.disabled = !zoomed;
      this.zoomIn.disabled = this.zoomK >= MAX_ZOOM - 1e-9;
      this.panLeft.disabled = !zoomed || this.zx0 <= this.xStart + 0.01;
      this.panRight.disabled = !zoomed || this.zx1 >= this.xEnd - 0.01;
      this.root.setAttribute("data-zoom", zoomed ? `${this.zx0} ${this.zx1}` : "");
    }

    /** Where the track is on screen, in the SVG's x: its start and end. */
    trackEnd() {
      return this.xStart + (this.xEnd - this.xStart) * this.fit;
    }

    /** Wrap the track's content once (a saved copy of a zoomed page has it already). */
    zoomLayer() {
      const svg = this.svg;
      let inner = svg.querySelector(":scope > g.woml-zoom-clip > g.woml-zoom");
      if (inner !== null) return inner;
      const id = (this.root.id || "woml-tl") + "-zoom-clip";
      const clip = document.createElementNS(SVG_NS, "clipPath");
      clip.setAttribute("id", id);
      const r = document.createElementNS(SVG_NS, "rect");
      r.setAttribute("x", String(this.xStart - 3));
      r.setAttribute("y", "0");
      r.setAttribute("height", String(this.svgHeight()));
      clip.append(r);
      const outer = document.createElementNS(SVG_NS, "g");
      outer.setAttribute("class", "woml-zoom-clip");
      outer.setAttribute("clip-path", `url(#${id})`);
      inner = document.createElementNS(SVG_NS, "g");
      inner.setAttribute("class", "woml-zoom");
      outer.append(clip, inner);
      const track = [...svg.children].filter((el) =>
        ["woml-axis", "woml-break", "woml-mark", "woml-lane", "woml-replay-cursor"].some((c) =>
          el.classList.contains(c),
        ),
      );
      if (track.length === 0) return null;
      svg.insertBefore(outer, track[0]);
      const column = document.createElementNS(SVG_NS, "g");
      column.setAttribute("class", "woml-step-column");
      for (const el of track) {
        inner.append(el);
        if (el.classList.contains("woml-lane")) toColumn(el, column);
      }
      svg.insertBefore(column, outer.nextSibling);
      return inner;
    }

    drawZoom() {
      const inner = this.zoomLayer();
      if (inner === null) return;
      const k = this.scale();
      const tx = this.xStart - this.zx0 * k;
      const zoomed = this.transformed();
      const clip = this.svg.querySelector(":scope > g.woml-zoom-clip > clipPath > rect");
      const width = num(this.svg, "width", this.xEnd + 60);
      if (clip !== null) {
        // Only what the zoom moves needs keeping off the step column: unzoomed, the clip
        // would cut the axis's own first tick label, centred on t = 0.
        const left = zoomed ? this.xStart - 3 : 0;
        clip.setAttribute("x", String(left));
        clip.setAttribute("width", String(Math.max(0, width - left)));
      }
      this.root.setAttribute("data-track", `${this.xStart} ${this.trackEnd()}`);
      inner.setAttribute("transform", zoomed ? `matrix(${k} 0 0 1 ${tx} 0)` : "");
      // Patterns (the stripes of a threw bar) keep their spacing.
      for (const p of this.svg.querySelectorAll("pattern")) {
        if (zoomed) p.setAttribute("patternTransform", `scale(${1 / k} 1)`);
        else p.removeAttribute("patternTransform");
      }
      this.zoomShapes(inner);
      for (const t of inner.querySelectorAll("g.woml-break text")) {
        this.scaleBack(t, num(t, "x", 0));
      }
      for (const z of inner.querySelectorAll("g.woml-break polyline")) {
        const pts = (z.getAttribute("points") || "").split(/[\s,]+/).map(parseFloat);
        const xs = pts.filter((_v, i) => i % 2 === 0).filter(Number.isFinite);
        this.scaleBack(z, xs.length ? (Math.min(...xs) + Math.max(...xs)) / 2 : 0);
      }
      for (const m of inner.querySelectorAll("g.woml-mark")) {
        const line = m.querySelector("line");
        const x = line === null ? 0 : num(line, "x1", 0);
        for (const t of m.querySelectorAll("text")) this.scaleBack(t, x);
      }
      this.zoomTicks(inner);
    }

    /** The zoom on what `container` holds (the track, or a lane built later): every
     * stroke keeps its width, every text (and an inside label's plate) its size about
     * its anchor, a bar its least width on screen, a wait its start at its bar's end, a
     * lane's note its place. */
    zoomShapes(container) {
      const k = this.scale();
      const tx = this.xStart - this.zx0 * k;
      const zoomed = this.transformed();
      for (const el of container.querySelectorAll("rect, line, polyline, path")) {
        el.setAttribute("vector-effect", "non-scaling-stroke");
      }
      const now = this.t !== undefined && this.t < this.end ? this.t : Infinity; // a replay's t
      const barEnd = new Map(); // "step n" → the zoomed right end of that attempt's bar
      const segs = [...container.querySelectorAll("g.woml-seg")];
      const isBar = (g) => g.classList.contains("woml-attempt") || g.classList.contains("woml-planned");
      for (const g of [...segs.filter(isBar), ...segs.filter((el) => !isBar(el))]) {
        const x0 = num(g, "data-x0", 0);
        const x1 = num(g, "data-x1", x0);
        const label = g.querySelector("text.woml-label");
        const p = label === null ? x0 : anchorOf(label, x0);
        for (const el of g.querySelectorAll("text, rect.woml-plate")) this.scaleBack(el, p);
        const t0 = num(g, "data-t0", 0);
        const t1 = num(g, "data-t1", t0);
        const key = g.getAttribute("data-step") + " " + g.getAttribute("data-n");
        if (isBar(g)) {
          // A bar keeps its least width (MIN_BAR_W) on screen, no more: its true width
          // from its times otherwise.
          const width = Math.max(this.axis.x(Math.min(t1, now)) - this.axis.x(t0), MIN_BAR_PX / k);
          for (const r of g.querySelectorAll("rect.woml-bar, rect.woml-pattern")) {
            zoomAttr(r, "width", zoomed ? width : null);
          }
          barEnd.set(key, this.axis.x(t0) + width);
          continue;
        }
        // A wait starts where its attempt's bar ends on screen (the unzoomed drawing
        // starts it after the bar's least width, which the zoom would widen).
        const start = Math.max(this.axis.x(t0), barEnd.get(key) ?? -Infinity);
        const end = Math.max(start, Math.min(x1, this.axis.x(now)));
        for (const r of g.querySelectorAll("rect.woml-bar")) {
          zoomAttr(r, "x", zoomed ? start : null);
          zoomAttr(r, "width", zoomed ? end - start : null);
        }
        for (const line of g.querySelectorAll("line.woml-wait-line")) {
          if (num(line, "x1", 0) !== num(line, "x2", 0)) zoomAttr(line, "x1", zoomed ? start : null);
        }
      }
      // A lane's note ("not run: …") stays where it is on screen.
      for (const t of container.querySelectorAll("text.woml-note")) {
        if (zoomed) t.setAttribute("transform", `matrix(${1 / k} 0 0 1 ${-tx / k} 0)`);
        else t.removeAttribute("transform");
      }
    }

    /** Scale `el` back about x = `p`, so that the zoom leaves its size as drawn. */
    scaleBack(el, p) {
      if (!this.transformed()) {
        el.removeAttribute("transform");
        return;
      }
      const k = this.scale();
      el.setAttribute("transform", `translate(${p} 0) scale(${1 / k} 1) translate(${-p} 0)`);
    }

    /** Ticks for the window shown, like the axis's own (its look copied), and the
     * axis's own hidden while zoomed. */
    zoomTicks(inner) {
      const axis = inner.querySelector("g.woml-axis");
      if (axis === null) return;
      let mine = this.svg.querySelector(":scope > g.woml-zoom-axis");
      if (mine !== null) mine.remove();
      const zoomed = this.transformed();
      axis.style.display = zoomed ? "none" : "";
      if (!zoomed) return;
      const grid = axis.querySelector("line.woml-grid");
      const label = axis.querySelector("text.woml-tick");
      if (grid === null || label === null) return;
      mine = document.createElementNS(SVG_NS, "g");
      mine.setAttribute("class", "woml-zoom-axis");
      const t0 = this.timeAtX(this.zx0);
      const t1 = this.timeAtX(this.zx1);
      const perS = (this.trackEnd() - this.xStart) / Math.max(t1 - t0, 1e-9);
      const step = TICK_STEPS.find((s) => s * perS >= TICK_MIN_PX) || TICK_STEPS[TICK_STEPS.length - 1];
      const breaks = [...inner.querySelectorAll("g.woml-break")].map((b) => [
        num(b, "data-t0", 0),
        num(b, "data-t1", 0),
      ]);
      const first = Math.ceil(t0 / step - 1e-9);
      for (let i = first; i * step <= t1 + 1e-9 && i - first < 200; i += 1) {
        const t = i * step;
        if (breaks.some(([a, b]) => t > a && t < b)) continue;
        const x = this.outerX(this.axis.x(t)); // drawn unzoomed, where the zoom puts t
        if (x < this.xStart - 0.5 || x > this.trackEnd() + 0.5) continue;
        const g = grid.cloneNode(false);
        g.setAttribute("x1", String(x));
        g.setAttribute("x2", String(x));
        const text = label.cloneNode(false);
        text.removeAttribute("transform");
        text.setAttribute("x", String(x));
        text.textContent = formatTime(Math.round(t / step) * step);
        mine.append(g, text);
      }
      const clip = this.svg.querySelector(":scope > g.woml-zoom-clip");
      this.svg.insertBefore(mine, clip);
    }

    /** Arrow keys and Page Up/Down move by a share of the drawn axis (as Play does),
     * Home and End jump to the ends. */
    slid(e) {
      const width = this.xEnd - this.xStart;
      const by = {
        ArrowRight: width / KEY_STEPS,
        ArrowUp: width / KEY_STEPS,
        ArrowLeft: -width / KEY_STEPS,
        ArrowDown: -width / KEY_STEPS,
        PageUp: width / PAGE_STEPS,
        PageDown: -width / PAGE_STEPS,
      }[e.key];
      let t;
      if (e.key === "Home") t = 0;
      else if (e.key === "End") t = this.end;
      else if (by !== undefined) t = this.timeAtX(this.axis.x(this.t) + by);
      else return;
      e.preventDefault();
      this.pause();
      this.show(t);
    }

    timeAtX(x) {
      if (x <= this.xStart) return 0;
      if (x >= this.xEnd) return this.end;
      return Math.min(this.end, Math.max(0, this.axis.t(x)));
    }

    start() {
      if (this.t >= this.end) this.show(0);
      if (!(this.xEnd > this.xStart)) {
        this.show(this.end);
        return;
      }
      this.playing = true;
      this.showPlaying();
      let x = this.axis.x(this.t);
      let last = null;
      const speed = (this.xEnd - this.xStart) / PLAY_MS; // px per ms: uniform in drawn x
      const step = (now) => {
        if (!this.playing) return;
        if (!this.root.isConnected) {
          this.pause();
          return;
        }
        if (last !== null) x += (now - last) * speed;
        last = now;
        if (x >= this.xEnd) {
          this.show(this.end);
          this.pause();
          return;
        }
        this.show(this.timeAtX(x));
        this.frame = requestAnimationFrame(step);
      };
      this.frame = requestAnimationFrame(step);
    }

    pause() {
      if (this.frame) cancelAnimationFrame(this.frame);
      this.frame = 0;
      if (!this.playing) return;
      this.playing = false;
      this.showPlaying();
    }

    showPlaying() {
      const mark = document.createElement("span");
      mark.setAttribute("aria-hidden", "true");
      mark.textContent = this.playing ? "\u275a\u275a" : "\u25b6";
      this.play.replaceChildren(mark, this.playing ? " Pause" : " Play");
    }

    /** Draw the run as it was at `t`: later segments hidden, the ones in progress cut
     * at x(t) (a running attempt marked `woml-replay-running`), planned ones hidden. */
    show(t) {
      t = Math.min(this.end, Math.max(0, t));
      this.t = t;
      const whole = t >= this.end;
      const xt = this.axis.x(t);
      this.replay(this.segs, t);
      this.slider.value = String(t);
      const text = formatTime(t);
      this.slider.setAttribute("aria-valuetext", text);
      this.time.textContent = text;
      this.at.textContent = whole ? "" : " \u00b7 replay at t = " + text;
      this.at.hidden = whole;
      const box = this.svg.viewBox && this.svg.viewBox.baseVal;
      const height = box && box.height ? box.height : num(this.svg, "height", 0);
      this.cursor.setAttribute("x1", String(xt));
      this.cursor.setAttribute("x2", String(xt));
      this.cursor.setAttribute("y1", "0");
      this.cursor.setAttribute("y2", String(height));
      this.cursor.style.display = whole ? "none" : "";
      // The replay redraws shapes as drawn unzoomed: zoom them again.
      if (this.transformed()) this.drawZoom();
    }

    /** Segments `segs` as they were at `t` (`show`). */
    replay(segs, t) {
      const whole = t >= this.end;
      const xt = this.axis.x(t);
      for (const s of segs) {
        const planned = s.kind === "planned" || s.kind === "planned-wait";
        const hidden = !whole && (planned || s.t0 > t);
        const cut = !whole && !hidden && t < s.t1;
        s.el.classList.toggle("woml-replay-hidden", hidden);
        s.el.classList.toggle("woml-replay-running", cut && s.kind === "attempt");
        if (cut) this.cut(s, xt);
        else if (s.cut) this.uncut(s);
        s.cut = cut;
      }
    }

    cut(s, xt) {
      const right = Math.min(s.x1, Math.max(s.x0, xt)); // with the cursor, in the bar
      for (const { shape, was } of s.shapes) clip(shape, was, right);
      const label = s.label;
      if (label === null) return;
      const [text, x] = s.labelText;
      if (s.kind === "attempt") label.textContent = "#" + s.n + " running";
      const lx = parseFloat(x);
      if (Number.isFinite(lx) && lx >= s.x1 - 0.5) {
        // The label sits beside the bar: it follows the cut end.
        label.setAttribute("x", String(right + (lx - s.x1)));
        label.style.visibility = "";
        return;
      }
      // Over (or above, below) the bar: shown once the cut bar reaches its end.
      let fits = true;
      try {
        const bb = label.getBBox();
        fits = bb.width === 0 || bb.x + bb.width <= right + 0.5;
      } catch (_err) {
        fits = true;
      }
      label.style.visibility = fits ? "" : "hidden";
      if (!fits && s.kind !== "attempt") label.textContent = text;
    }

    uncut(s) {
      for (const { shape, was } of s.shapes) {
        for (const [name, value] of was) {
          if (value === null) shape.removeAttribute(name);
          else shape.setAttribute(name, value);
        }
        shape.style.visibility = "";
      }
      if (s.label === null) return;
      const [text, x] = s.labelText;
      s.label.textContent = text;
      if (x !== null) s.label.setAttribute("x", x);
      s.label.style.visibility = "";
    }
  }

  /** The step column's texts of `lane` (its id and status, not its note) into `column`,
   * which the zoom leaves in place. */
  function toColumn(lane, column) {
    for (const t of lane.querySelectorAll(":scope > text.woml-step-id, :scope > text.woml-muted")) {
      if (!t.classList.contains("woml-note")) column.append(t);
    }
  }

  /** What the replay needs of each segment in `container` (`show`, `cut`): its kind,
   * times, drawn extent, shapes with their drawn attributes, label and its text. */
  function segRecords(container) {
    const segs = [...container.querySelectorAll(".woml-seg")].map((el) => ({
      el,
      kind: ["attempt", "wait", "planned-wait", "planned"].find((k) =>
        el.classList.contains("woml-" + k),
      ),
      n: el.getAttribute("data-n"),
      t0: num(el, "data-t0", 0),
      t1: num(el, "data-t1", 0),
      x0: num(el, "data-x0", 0),
      x1: num(el, "data-x1", 0),
      shapes: [...el.querySelectorAll("rect, line")].map((shape) => ({
        shape,
        was: new Map(["x", "width", "x1", "x2"].map((a) => [a, shape.getAttribute(a)])),
      })),
      label: el.querySelector(".woml-label"),
    }));
    for (const s of segs) {
      if (s.label !== null) s.labelText = [s.label.textContent, s.label.getAttribute("x")];
    }
    return segs;
  }

  /** A big saved drawing's lanes (`picture.drawing_data`: `[ref, y, height, segments,
   * markup]` each, in order), of which only those near the view are built: parsing and
   * laying out all of a 1,000-step run's (a 98,000 px tall SVG) took most of the time
   * to show it (issue 21 item 6). The drawing keeps its whole height meanwhile. A lane
   * is built when it comes within a window's height of the window (a scroll anywhere in
   * the page, a resize), when one of every LANE_CHUNK lanes' placeholders shows at all
   * (an IntersectionObserver: inside a scrolled output, a frame, after the page moved),
   * beside a focused attempt (Tab goes on to the next lane's), and when one of its
   * attempts is selected; the first and last lanes at once (Tab into and out of the
   * drawing). The controller then gives it the replay and zoom (`laneBuilt`). A
   * drawing of at most EAGER_LANES lanes builds them all at once. */
  class LazyLanes {
    constructor(ctl, svg, lanes) {
      this.ctl = ctl;
      this.svg = svg;
      this.slots = [];
      for (const lane of Array.isArray(lanes) ? lanes : []) {
        if (!Array.isArray(lane) || lane.length < 5 || typeof lane[4] !== "string") continue;
        const [ref, y, h, n] = lane.map((v, i) => (i === 0 ? String(v) : +v));
        if (!Number.isFinite(y) || !Number.isFinite(h)) continue;
        this.slots.push({ ref, y, h, n: Number.isFinite(n) ? n : 0, markup: lane[4], done: false,
          el: null });
      }
      this.total = this.slots.reduce((sum, s) => sum + s.n, 0);
      this.byRef = new Map(this.slots.map((s, i) => [s.ref, i]));
      this.index = new Map(); // a built g.woml-lane → its slot
      this.chunks = []; // per LANE_CHUNK slots: its placeholder and how many are not built
      this.observer = null;
    }

    start() {
      const n = this.slots.length;
      if (n <= EAGER_LANES) {
        this.build(0, n);
        return;
      }
      this.build(0, 1);
      this.build(n - 1, n);
      this.fill();
      if (typeof IntersectionObserver === "function") {
        this.observer = new IntersectionObserver((entries) => this.seen(entries));
        for (let i = 0; i < n; i += LANE_CHUNK) {
          const part = this.slots.slice(i, i + LANE_CHUNK);
          const left = part.filter((s) => !s.done).length;
          if (left === 0) continue;
          const y = part[0].y;
          const h = part[part.length - 1].y + part[part.length - 1].h - y;
          const rect = document.createElementNS(SVG_NS, "rect");
          rect.setAttribute("class", "woml-lane-slot");
          for (const [name, value] of [["x", 0], ["y", y], ["width", "100%"], ["height", h],
            ["fill", "none"], ["pointer-events", "none"]]) rect.setAttribute(name, String(value));
          this.svg.append(rect);
          this.chunks[i / LANE_CHUNK] = { rect, y, h, left };
          this.observer.observe(rect);
        }
      }
      this.ctl.on(document, "scroll", () => this.fill(), { capture: true, passive: true });
      this.ctl.on(window, "resize", () => this.fill());
      this.ctl.on(this.svg, "focusin", (e) => {
        const lane = e.target instanceof Element ? e.target.closest("g.woml-lane") : null;
        const i = lane === null ? undefined : this.index.get(lane);
        if (i !== undefined) this.build(Math.max(0, i - 1), i + 2);
      });
    }

    stop() {
      if (this.observer !== null) this.observer.disconnect();
      this.observer = null;
    }

    /** Build the lanes within a window's height of the window (a frame's window is at
     * most a screen high here: some front ends make it as tall as its content, the
     * observer then finds what shows). */
    fill() {
      const svg = this.svg;
      if (!svg.isConnected) return;
      const box = svg.getBoundingClientRect();
      const vb = svg.viewBox && svg.viewBox.baseVal;
      const tall = vb && vb.height ? vb.height : num(svg, "height", 0);
      if (!(box.height > 0) || !(tall > 0)) return; // not laid out: hidden
      const k = box.height / tall;
      const screenH = window.screen && window.screen.height > 0 ? window.screen.height : Infinity;
      const view = Math.min(window.innerHeight || 0, screenH);
      this.buildWithin((-view - box.top) / k, (2 * view - box.top) / k);
    }

    /** Placeholders that show: their lanes in sight, and as many again around them. */
    seen(entries) {
      this.fill();
      for (const e of entries) {
        const chunk = this.chunks.find((c) => c !== undefined && c.rect === e.target);
        if (!e.isIntersecting || chunk === undefined) continue;
        const box = e.boundingClientRect;
        const k = box.height / chunk.h;
        if (!(k > 0)) continue;
        const top = chunk.y + (e.intersectionRect.top - box.top) / k;
        const bottom = chunk.y + (e.intersectionRect.bottom - box.top) / k;
        const more = Math.max(bottom - top, 1);
        this.buildWithin(top - more, bottom + more);
      }
    }

    /** Build the lanes that reach into the drawing's y from `lo` to `hi`. */
    buildWithin(lo, hi) {
      const s = this.slots;
      let a = 0;
      let b = s.length;
      while (a < b) {
        const m = (a + b) >> 1;
        if (s[m].y + s[m].h <= lo) a = m + 1;
        else b = m;
      }
      let end = a;
      while (end < s.length && s[end].y < hi) end += 1;
      this.build(a, end);
    }

    buildStep(ref) {
      const i = this.byRef.get(ref);
      if (i !== undefined) this.build(i, i + 1);
    }

    /** Build slots `from` to `to` (not included) that are not built yet, each in its
     * place: the lanes stay in their order (the order of Tab and of painting). */
    build(from, to) {
      for (let i = from; i < Math.min(to, this.slots.length); i += 1) {
        const slot = this.slots[i];
        if (slot.done) continue;
        slot.done = true;
        const holder = document.createElementNS(SVG_NS, "g");
        holder.innerHTML = slot.markup; // SVG markup: parsed in the svg's namespace
        slot.markup = "";
        const lane = holder.firstElementChild;
        const chunk = this.chunks[Math.floor(i / LANE_CHUNK)];
        if (chunk !== undefined && --chunk.left === 0) {
          if (this.observer !== null) this.observer.unobserve(chunk.rect);
          chunk.rect.remove();
        }
        if (lane === null) continue;
        this.place(lane, i);
        slot.el = lane;
        this.index.set(lane, i);
        this.ctl.laneBuilt(lane);
      }
    }

    place(lane, i) {
      const after = this.slots.slice(i + 1).find((s) => s.el !== null);
      const before = after === undefined
        ? this.slots.slice(0, i).reverse().find((s) => s.el !== null)
        : undefined;
      const inner = this.svg.querySelector(":scope > g.woml-zoom-clip > g.woml-zoom");
      if (after !== undefined) after.el.before(lane);
      else if (before !== undefined) before.el.after(lane);
      else if (inner !== null) inner.insertBefore(lane, inner.querySelector(":scope > .woml-replay-cursor"));
      else this.svg.insertBefore(lane, this.svg.querySelector(":scope > g.woml-legend"));
      const column = this.svg.querySelector(":scope > g.woml-step-column");
      if (inner !== null && column !== null && lane.parentNode === inner) toColumn(lane, column);
    }
  }

  /** Cut a shape of a segment at x = `right`: a rect's width, a horizontal line's end;
   * a vertical line (a wait's end tick) beyond it is hidden. `was` holds the drawn
   * attributes. */
  function clip(shape, was, right) {
    const get = (name) => parseFloat(was.get(name));
    if (shape.tagName.toLowerCase() === "rect") {
      const x = Number.isFinite(get("x")) ? get("x") : 0;
      const w = Math.max(0, Math.min(get("width"), right - x));
      if (Number.isFinite(w)) shape.setAttribute("width", String(w));
      return;
    }
    const x1 = get("x1");
    const x2 = get("x2");
    if (!Number.isFinite(x1) || !Number.isFinite(x2)) return;
    if (Math.abs(x2 - x1) < 0.01) {
      shape.style.visibility = x1 > right + 0.5 ? "hidden" : "";
      return;
    }
    const lo = Math.min(x1, x2);
    shape.style.visibility = lo > right ? "hidden" : "";
    if (x2 >= x1) shape.setAttribute("x2", String(Math.min(x2, Math.max(x1, right))));
    else shape.setAttribute("x1", String(Math.min(x1, Math.max(x2, right))));
  }

  /** The controller of `root` (a `.woml-timeline`), created on first call. */
  function attach(root, options) {
    if (!root || !(root instanceof Element) || !root.classList.contains("woml-timeline")) {
      return null;
    }
    if (root._womlTimeline) return root._womlTimeline;
    const ctl = new Timeline(root, options || {});
    root._womlTimeline = ctl;
    return ctl;
  }

  /** A big saved timeline keeps its attempts' details as data (`html.details_data`):
   * `script.woml-details-data`, step id → the markup of its `details` (JSON, gzipped,
   * base64), each step's `p.woml-attempt-lines` standing in for them. A step's details
   * take its lines' place when the step comes near the view, or when one of its
   * attempts (or a row of its key lineage) is clicked or pressed; the selection made
   * before the data was ready is made again once it is, opening the details. */
  function deferDetails(root) {
    const data = root.querySelector(":scope > script.woml-details-data");
    if (data === null || root._womlDeferred || typeof DecompressionStream !== "function") return;
    const waiting = new Map(); // step id → its p.woml-attempt-lines
    for (const p of root.querySelectorAll("p.woml-attempt-lines")) {
      if (p.closest(".woml-timeline") === root) waiting.set(p.dataset.step, p);
    }
    let table = null; // step id → markup, once decoded
    let loading = null;
    const wanted = new Set();
    const put = (step) => {
      const p = waiting.get(step);
      if (p === undefined) return false;
      waiting.delete(step);
      if (observer !== null) observer.unobserve(p);
      const html = Object.prototype.hasOwnProperty.call(table, step) ? table[step] : null;
      if (typeof html !== "string") return false; // not ours: the lines stay
      p.insertAdjacentHTML("beforebegin", html);
      p.remove();
      return true;
    };
    const decode = async () => JSON.parse(await gunzipText(data.textContent));
    const load = () => {
      if (loading !== null) return;
      loading = decode()
        .catch(() => ({}))
        .then((decoded) => {
          table = decoded !== null && typeof decoded === "object" ? decoded : {};
          const ctl = root._womlTimeline;
          let again = false;
          for (const step of wanted) {
            if (put(step) && ctl && ctl.selected && ctl.selected[0] === step) again = true;
          }
          wanted.clear();
          if (again) ctl.select(ctl.selected, true); // open what was selected meanwhile
        });
    };
    const fill = (step) => {
      if (table !== null) {
        put(step);
        return;
      }
      wanted.add(step);
      load();
    };
    const observer = typeof IntersectionObserver === "function"
      ? new IntersectionObserver((entries) => {
          for (const e of entries) if (e.isIntersecting) fill(e.target.dataset.step);
        }, { rootMargin: "400px 0px" })
      : null;
    for (const p of waiting.values()) {
      if (observer !== null) observer.observe(p);
    }
    const early = (e) => {
      if (e.type === "keydown" && e.key !== "Enter" && e.key !== " ") return;
      const hit = e.target instanceof Element
        ? e.target.closest(".woml-seg.woml-attempt, tr.woml-lineage-row")
        : null;
      if (hit !== null && hit.closest(".woml-timeline") === root) fill(hit.dataset.step);
    };
    // Capture: before the controller's own (bubbling) handler selects the attempt.
    root.addEventListener("click", early, true);
    root.addEventListener("keydown", early, true);
    root._womlDeferred = fill;
    // Decode now, off the parser's way (a task later; the gunzip streams): a click
    // then finds the data ready.
    setTimeout(load, 0);
  }

  /** The inline script's entry: its root is the element just before it, or failing
   * that (a front end that moved the script) the element with the embedded id. */
  function fromScript(script, id) {
    const begin = (root, lanes) => {
      const ctl = attach(root, lanes ? { lanes } : undefined);
      if (ctl !== null) deferDetails(root);
      return ctl;
    };
    // A compact picture: the live drawing is decoded first (a few ms; the picture
    // shows meanwhile), then attached (null returned: not attached yet).
    const start = (root) => {
      const drawing = root instanceof Element && !root._womlTimeline && !root._womlDrawing
        ? drawingOf(root)
        : null;
      if (drawing === null) return root && root._womlDrawing ? null : begin(root);
      root._womlDrawing = drawing
        .then((d) => {
          const ok = d !== null && typeof d === "object" && typeof d.svg === "string";
          return ok && adoptPicture(root, d.svg) ? d.lanes : undefined;
        }, () => undefined)
        .then((lanes) => begin(root, lanes));
      return null;
    };
    const before = script ? script.previousElementSibling : null;
    if (before && before.classList && before.classList.contains("woml-timeline")) {
      return start(before);
    }
    const byId = id ? document.getElementById(id) : null;
    if (byId) return start(byId);
    if (id) {
      // Not in the document yet: a front end may connect the output a moment later.
      setTimeout(() => start(document.getElementById(id)), 0);
    }
    return null;
  }

  // --- the live widget (anywidget) ----------------------------------------------------

  /** anywidget's `render`: the timeline from the `html` trait, redrawn on change with
   * the selection, open details, focus and scroll kept; a Cancel button while the run
   * is running and `cancellable`, sending `{type: "cancel"}` once. */
  function render(model, el) {
    el.classList.add("woml-widget");
    ensureStyle(el);
    const bar = document.createElement("div");
    bar.className = "woml-live-bar";
    const cancel = document.createElement("button");
    cancel.type = "button";
    cancel.className = "woml-cancel";
    cancel.title = "Cancel the run: the running attempt ends cancelled";
    bar.append(cancel);
    const host = document.createElement("div");
    host.className = "woml-widget-host";
    el.append(bar, host);
    let ctl = null;
    let sent = false;

    const draw = () => {
      const keep = ctl !== null ? ctl.state() : null;
      if (ctl !== null) ctl.detach();
      host.innerHTML = model.get("html") || "";
      ctl = attach(host.querySelector(".woml-timeline"), { styled: true });
      if (ctl !== null && keep !== null) ctl.restore(keep);
    };
    const drawCancel = () => {
      bar.hidden = !(model.get("cancellable") && model.get("status") === "running");
      const busy = sent || Boolean(model.get("cancelling"));
      cancel.disabled = busy;
      cancel.textContent = busy ? "Cancelling\u2026" : "Cancel";
    };
    const onCancel = () => {
      if (sent) return;
      sent = true;
      drawCancel();
      model.send({ type: "cancel" });
    };
    cancel.addEventListener("click", onCancel);
    const events = {
      "change:html": draw,
      "change:status": drawCancel,
      "change:cancellable": drawCancel,
      "change:cancelling": () => {
        sent = Boolean(model.get("cancelling")); // false again: on_cancel failed, retry
        drawCancel();
      },
    };
    for (const [name, fn] of Object.entries(events)) model.on(name, fn);
    draw();
    drawCancel();
    return () => {
      for (const [name, fn] of Object.entries(events)) model.off(name, fn);
      cancel.removeEventListener("click", onCancel);
      if (ctl !== null) ctl.detach();
    };
  }

  return { attach, fromScript, render, formatTime };
})();
