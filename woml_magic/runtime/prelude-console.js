// Console output of one attempt (spec §4.4), a lazy part of prelude.js: compiled in
// the attempt's context on the script's first console call. `I` holds the intrinsics
// prelude.js captured before the script ran; nothing here looks up a global the
// script could replace. The caps here only keep huge strings from crossing into the
// worker; the worker counts lines and UTF-8 bytes itself and enforces the limits
// (max_log_lines, max_log_bytes), whatever this code is made to do.
(function (I, emitRaw, settings) {
  "use strict";
  const { apply, stringify, join, isWellFormed, toWellFormed, slice } = I;
  const { ErrorCtor, StringCtor, objectToString } = I;
  let logLines = 0;
  let logChars = 0;
  let logCut = false;

  function formatArg(v) {
    if (typeof v === "string") return v;
    if (typeof v === "function") return "[Function: " + (v.name || "anonymous") + "]";
    if (typeof v !== "object" || v === null) return StringCtor(v);
    if (v instanceof ErrorCtor) return StringCtor(v.name) + ": " + StringCtor(v.message);
    try {
      const text = stringify(v, (k, x) => {
        if (typeof x === "bigint") return StringCtor(x) + "n";
        if (typeof x === "function") return "[Function: " + (x.name || "anonymous") + "]";
        if (x === undefined) return "undefined";
        return x;
      });
      return typeof text === "string" ? text : StringCtor(v);
    } catch {
      return apply(objectToString, v, []);
    }
  }

  function log(level, args) {
    if (logCut) return;
    const parts = { __proto__: null, length: 0 };
    for (let i = 0; i < args.length; i++) {
      let piece;
      try { piece = formatArg(args[i]); } catch { piece = "?"; }
      parts[i] = typeof piece === "string" ? piece : "?";
      parts.length = i + 1;
    }
    let text = apply(join, parts, [" "]);
    if (!apply(isWellFormed, text, [])) text = apply(toWellFormed, text, []);
    if (logLines + 1 > settings.maxLogLines || logChars >= settings.maxLogChars) {
      logCut = true;
    }
    if (text.length > settings.maxLogChars - logChars) {
      text = apply(slice, text, [0, settings.maxLogChars - logChars + 1]);
    }
    logLines += 1;
    logChars += text.length;
    // The worker says whether to go on: "" yes, anything else means the caps are met.
    if (emitRaw("log", level, apply(join, [text], [""])) !== "") logCut = true;
  }

  return { __proto__: null, log, formatArg };
})
