// Console output of one attempt (spec §4.4), a lazy part of prelude.js: compiled in
// the attempt's context on the script's first console call. Capped per attempt so a
// script cannot flood the kernel. `I` holds the intrinsics prelude.js captured
// before the script ran; nothing here looks up a global the script could replace.
(function (I, emitRaw, settings) {
  "use strict";
  const { apply, stringify, join, isWellFormed, toWellFormed, slice, max } = I;
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
      return text === undefined ? StringCtor(v) : text;
    } catch {
      return apply(objectToString, v, []);
    }
  }

  function log(level, args) {
    if (logCut) return;
    const parts = [];
    for (let i = 0; i < args.length; i++) parts[i] = formatArg(args[i]);
    let text = apply(join, parts, [" "]);
    if (!apply(isWellFormed, text, [])) text = apply(toWellFormed, text, []);
    let cut = false;
    if (logLines + 1 > settings.maxLogLines) {
      cut = true;
      text = "";
    } else if (logChars + text.length > settings.maxLogChars) {
      cut = true;
      text = apply(slice, text, [0, max(0, settings.maxLogChars - logChars)]);
    }
    if (!cut || text.length > 0) {
      logLines += 1;
      logChars += text.length;
      emitRaw(stringify({ type: "log", level, text }));
    }
    if (cut) {
      logCut = true;
      emitRaw(stringify({
        type: "log", level: "warn",
        text: "… console output truncated: an attempt may print at most " + settings.maxLogLines
          + " lines or " + settings.maxLogChars + " characters",
      }));
    }
  }

  return { log, formatArg };
})
