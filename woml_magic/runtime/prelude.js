// The per-attempt prelude of the script worker (spec §3.3, §3.4, §3.6, §4.4, §4.5).
//
// Evaluated once in every fresh QuickJS context, before the script. The host pads
// this text with blank lines so that no prelude frame shares a line number with the
// script (whose lines are 2 .. scriptLines + 1): a stack frame inside that range is
// a script frame, so error lines map to cell lines without guessing.
//
// The expression below is a function of the host's emit callable and a JSON config;
// it returns one dispatcher `host(command, argument)` that the worker calls. Every
// string handed back to Python comes out of JSON.stringify or Array.prototype.join:
// QuickJS may hand other strings over as ropes Python cannot read.
(function (emitRaw, configText) {
  "use strict";

  // Intrinsics are captured now: the script may replace globals, and the
  // validation below must not run the script's replacements.
  const { keys, freeze, isFrozen, getPrototypeOf, defineProperty } = Object;
  const { apply, construct } = Reflect;
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const isArray = Array.isArray;
  const isView = ArrayBuffer.isView;
  const isFiniteNumber = Number.isFinite;
  const join = Array.prototype.join;
  const push = Array.prototype.push;
  const isWellFormed = String.prototype.isWellFormed;
  const toWellFormed = String.prototype.toWellFormed;
  const charCodeAt = String.prototype.charCodeAt;
  const slice = String.prototype.slice;
  const test = RegExp.prototype.test;
  const promiseThen = Promise.prototype.then;
  const fnToString = Function.prototype.toString;
  const mapGet = Map.prototype.get;
  const mapSet = Map.prototype.set;
  const mapDelete = Map.prototype.delete;
  const weakGet = WeakMap.prototype.get;
  const weakSet = WeakMap.prototype.set;
  const ObjectProto = Object.prototype;
  const ArrayProto = Array.prototype;
  const InternalErrorProto = InternalError.prototype;
  const PromiseCtor = Promise;
  const RealDate = Date;
  const perf = performance;
  const perfNowFn = performance.now;
  const g = globalThis;

  const config = parse(configText);
  const FIRST_LINE = 2;
  const LAST_LINE = config.scriptLines + 1;
  const OOM_MESSAGE = "out of memory";
  const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

  // ---- out-of-memory and error-line tracking (spec §3.2 crash, line mapping) ----
  // QuickJS builds the stack of every Error at construction and calls this hook with
  // structured frames. An engine "out of memory" InternalError passes through here
  // even when the script later catches it, which is how a caught OOM is still seen.
  let oomSeen = false;
  let nullCaught = false;
  const errorLines = new WeakMap();

  function prepareStackTrace(err, frames) {
    try {
      if (err !== null && typeof err === "object" && getPrototypeOf(err) === InternalErrorProto
          && err.message === OOM_MESSAGE) {
        oomSeen = true;
      }
      // The line is the first script frame, skipping the constructors of an Error
      // subclass: `throw new PaymentError(...)` is reported where it is thrown.
      let line = null;
      let leading = true;
      for (let i = 0; i < frames.length; i++) {
        const f = frames[i];
        const ln = f.getLineNumber();
        const inScript = f.getFileName() === "<input>" && ln >= FIRST_LINE && ln <= LAST_LINE;
        if (leading && f.isConstructor()) {
          if (inScript && line === null) line = ln;
          continue;
        }
        leading = false;
        if (inScript) {
          line = ln;
          break;
        }
      }
      if (line !== null) apply(weakSet, errorLines, [err, line]);
      const parts = [];
      for (let i = 0; i < frames.length; i++) {
        const f = frames[i];
        parts[i] = "    at " + (f.getFunctionName() || "<anonymous>") + " (" + f.getFileName()
          + ":" + f.getLineNumber() + ":" + f.getColumnNumber() + ")";
      }
      return apply(join, parts, ["\n"]);
    } catch {
      return "";
    }
  }
  Error.prepareStackTrace = prepareStackTrace;
  // Lock the hook and the frame limit: QuickJS keeps the hook internally, so a
  // non-configurable accessor that ignores writes keeps the script from removing it.
  defineProperty(Error, "prepareStackTrace", {
    get() { return undefined; }, set(_) {}, enumerable: false, configurable: false,
  });
  defineProperty(Error, "stackTraceLimit", { value: 64, writable: false, configurable: false });

  // The host's catch instrumentation calls this with every caught value: QuickJS
  // throws `null` when memory is so tight that it cannot even build the error.
  defineProperty(g, "__womlCaught", {
    value: function (e) { if (e === null) nullCaught = true; return e; },
    writable: false, enumerable: false, configurable: false,
  });
  // Promise rejection handlers see the same `null`.
  Promise.prototype.then = function then(onFulfilled, onRejected) {
    if (typeof onRejected === "function") {
      const handler = onRejected;
      onRejected = function (reason) {
        if (reason === null) nullCaught = true;
        return apply(handler, this, [reason]);
      };
    }
    return apply(promiseThen, this, [onFulfilled, onRejected]);
  };

  // ---- the run's clock (spec §4.4) ----
  let clockBase = config.nowMs;
  let perfBase = apply(perfNowFn, perf, []);
  function now() {
    return Math.floor(clockBase + (apply(perfNowFn, perf, []) - perfBase));
  }
  function setClock(ms) {
    if (typeof ms === "number" && isFiniteNumber(ms)) {
      clockBase = ms;
      perfBase = apply(perfNowFn, perf, []);
    }
  }
  function WomlDate(...args) {
    if (new.target === undefined) {
      return apply(RealDate.prototype.toString, construct(RealDate, [now()]), []);
    }
    return construct(RealDate, args.length === 0 ? [now()] : args, new.target);
  }
  WomlDate.prototype = RealDate.prototype;
  WomlDate.now = now;
  WomlDate.parse = RealDate.parse;
  WomlDate.UTC = RealDate.UTC;
  defineProperty(RealDate.prototype, "constructor", {
    value: WomlDate, writable: true, enumerable: false, configurable: true,
  });
  g.Date = WomlDate;

  // ---- console (spec §4.4): capped per attempt so a script cannot flood the kernel ----
  let logLines = 0;
  let logChars = 0;
  let logCut = false;

  function formatArg(v) {
    if (typeof v === "string") return v;
    if (typeof v === "function") return "[Function: " + (v.name || "anonymous") + "]";
    if (typeof v !== "object" || v === null) return String(v);
    if (v instanceof Error) return String(v.name) + ": " + String(v.message);
    try {
      const text = stringify(v, (k, x) => {
        if (typeof x === "bigint") return String(x) + "n";
        if (typeof x === "function") return "[Function: " + (x.name || "anonymous") + "]";
        if (x === undefined) return "undefined";
        return x;
      });
      return text === undefined ? String(v) : text;
    } catch {
      return apply(ObjectProto.toString, v, []);
    }
  }

  function log(level, args) {
    if (logCut) return;
    const parts = [];
    for (let i = 0; i < args.length; i++) parts[i] = formatArg(args[i]);
    let text = apply(join, parts, [" "]);
    if (!apply(isWellFormed, text, [])) text = apply(toWellFormed, text, []);
    let cut = false;
    if (logLines + 1 > config.maxLogLines) {
      cut = true;
      text = "";
    } else if (logChars + text.length > config.maxLogChars) {
      cut = true;
      text = apply(slice, text, [0, Math.max(0, config.maxLogChars - logChars)]);
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
        text: "… console output truncated: an attempt may print at most " + config.maxLogLines
          + " lines or " + config.maxLogChars + " characters",
      }));
    }
  }
  const consoleObject = freeze({
    log: (...a) => log("log", a),
    info: (...a) => log("info", a),
    warn: (...a) => log("warn", a),
    error: (...a) => log("error", a),
    debug: (...a) => log("log", a),
  });

  // ---- services (spec §4.1, §4.4): stubs that ask the host and return a Promise ----
  const pending = new Map();
  let pendingCount = 0;
  let nextCall = 1;

  function callService(name, args) {
    // Created now so its stack records the script line of the call (spec §3.2).
    const carrier = new Error("services." + name + " failed");
    let argsText;
    try {
      argsText = stringify(args);
    } catch (e) {
      return PromiseCtor.reject(new TypeError(
        "services." + name + " arguments must be JSON values: " + String(e && e.message)));
    }
    const id = nextCall++;
    return new PromiseCtor((resolve, reject) => {
      apply(mapSet, pending, [id, { resolve, reject, carrier }]);
      pendingCount += 1;
      emitRaw(apply(join, [
        '{"type":"call","id":', stringify(id), ',"service":', stringify(name),
        ',"args":', argsText, "}",
      ], [""]));
    });
  }

  function buildServices(names) {
    const root = {};
    for (let i = 0; i < names.length; i++) {
      const name = names[i];
      const path = name.split(".");
      let node = root;
      for (let j = 0; j < path.length - 1; j++) {
        if (node[path[j]] === undefined) node[path[j]] = {};
        node = node[path[j]];
      }
      node[path[path.length - 1]] = (...args) => callService(name, args);
    }
    return deepFreeze(root);
  }

  function settle(text) {
    const m = parse(text);
    setClock(m.nowMs);
    const p = apply(mapGet, pending, [m.id]);
    if (p === undefined) return;
    apply(mapDelete, pending, [m.id]);
    pendingCount -= 1;
    if (m.ok) {
      p.resolve(m.value);
      return;
    }
    const e = p.carrier;
    defineProperty(e, "name", { value: String(m.name), writable: true, configurable: true });
    defineProperty(e, "message", { value: String(m.message), writable: true, configurable: true });
    const props = m.props || {};
    const names = keys(props);
    for (let i = 0; i < names.length; i++) {
      if (names[i] !== "name" && names[i] !== "message") e[names[i]] = props[names[i]];
    }
    p.reject(e);
  }

  // ---- frozen inputs (spec §3.4, §3.6) ----
  function deepFreeze(v) {
    if (v !== null && typeof v === "object" && !isFrozen(v)) {
      freeze(v);
      const ks = keys(v);
      for (let i = 0; i < ks.length; i++) deepFreeze(v[ks[i]]);
    }
    return v;
  }
  const context = deepFreeze(parse(config.context));
  const attempt = deepFreeze(parse(config.attempt));
  const services = buildServices(config.services);

  // ---- results (spec §3.3) ----
  function pathOf(base, key) {
    if (typeof key === "number") return base + "[" + key + "]";
    return apply(test, IDENT, [key]) ? base + "." + key : base + "[" + stringify(key) + "]";
  }

  function describeKind(v) {
    if (typeof v === "bigint") return "a BigInt (" + String(v) + "n)";
    if (typeof v === "symbol") return "a Symbol";
    if (typeof v === "function") return "a function";
    if (v instanceof Map) return "a Map";
    if (v instanceof Set) return "a Set";
    if (v instanceof WeakMap || v instanceof WeakSet) return "a " + v[Symbol.toStringTag];
    if (isView(v) || v instanceof ArrayBuffer) return "a " + (v.constructor && v.constructor.name || "binary buffer");
    if (v instanceof PromiseCtor) return "a Promise (did you forget `await`?)";
    const ctor = v.constructor;
    const name = typeof ctor === "function" && ctor.name ? ctor.name : "unnamed class";
    return "an instance of " + name + ", not a plain object";
  }

  class Invalid {
    constructor(message) { this.message = message; }
  }

  // Returns a clean copy made only of JSON values, or throws Invalid naming the path.
  function clean(value, path, key, ancestors) {
    let v = value;
    if (v !== null && (typeof v === "object" || typeof v === "bigint") && typeof v.toJSON === "function") {
      v = v.toJSON(key);
    }
    if (v === null || typeof v === "boolean") return v;
    if (typeof v === "undefined") throw new Invalid(path + " is undefined");
    if (typeof v === "number") {
      if (isFiniteNumber(v)) return v;
      throw new Invalid(path + " is " + String(v));
    }
    if (typeof v === "string") {
      if (!apply(isWellFormed, v, [])) {
        for (let i = 0; i < v.length; i++) {
          const c = apply(charCodeAt, v, [i]);
          const high = c >= 0xd800 && c <= 0xdbff;
          const low = c >= 0xdc00 && c <= 0xdfff;
          if (high) {
            const next = apply(charCodeAt, v, [i + 1]);
            if (next >= 0xdc00 && next <= 0xdfff) { i += 1; continue; }
          }
          if (high || low) {
            throw new Invalid(path + " contains a lone surrogate (U+"
              + c.toString(16).toUpperCase() + ") at index " + i);
          }
        }
      }
      return v;
    }
    if (typeof v !== "object") throw new Invalid(path + " is " + describeKind(v));
    for (let i = 0; i < ancestors.length; i++) {
      if (ancestors[i].value === v) {
        throw new Invalid(path + " is a cycle back to " + ancestors[i].path);
      }
    }
    const proto = getPrototypeOf(v);
    apply(push, ancestors, [{ value: v, path }]);
    let out;
    if (isArray(v) && proto === ArrayProto) {
      out = [];
      for (let i = 0; i < v.length; i++) {
        if (!(i in v)) throw new Invalid(pathOf(path, i) + " is an empty array slot");
        out[i] = clean(v[i], pathOf(path, i), String(i), ancestors);
      }
    } else if (proto === ObjectProto || proto === null) {
      out = { __proto__: null };
      const ks = keys(v);
      for (let i = 0; i < ks.length; i++) {
        const k = ks[i];
        defineProperty(out, k, {
          value: clean(v[k], pathOf(path, k), k, ancestors),
          enumerable: true, writable: true, configurable: true,
        });
      }
    } else {
      throw new Invalid(path + " is " + describeKind(v));
    }
    ancestors.length -= 1;
    return out;
  }

  // ---- running and reporting ----
  let started = false;
  let state = "pending";
  let settledValue;
  let rejection;

  function start(main) {
    if (started) throw new Error("an attempt runs its script once");
    started = true;
    if (typeof main !== "function" || apply(fnToString, main, []).length !== config.expectedLength) {
      state = "rejected";
      rejection = new SyntaxError(
        "the script closes its own function body early (an unbalanced `}`); a script must be "
        + "the body of one async function");
      return;
    }
    const p = main(context, attempt, services, consoleObject);
    apply(promiseThen, p, [
      (v) => { state = "fulfilled"; settledValue = v; },
      (e) => { state = "rejected"; rejection = e; },
    ]);
  }

  function safeString(get, fallback) {
    try {
      let s = String(get());
      if (!apply(isWellFormed, s, [])) s = apply(toWellFormed, s, []);
      return s.length > 4096 ? apply(slice, s, [0, 4096]) + "…" : s;
    } catch {
      return fallback;
    }
  }

  function describeRejection(r) {
    if (r === null) return { name: "null", message: "null", line: null, isNull: true };
    if (typeof r === "object" || typeof r === "function") {
      const line = apply(weakGet, errorLines, [r]);
      const isError = r instanceof Error;
      const name = isError || typeof r.name === "string"
        ? safeString(() => r.name, "Error") : (typeof r === "function" ? "function" : "object");
      const message = isError || typeof r.message === "string"
        ? safeString(() => r.message, "") : safeString(() => formatArg(r), "");
      return { name, message, line: line === undefined ? null : line, isNull: false };
    }
    return { name: typeof r, message: safeString(() => r, ""), line: null, isNull: false };
  }

  let resultText = null;

  function finish() {
    const out = { state, oom: oomSeen, nullCaught, pendingCalls: pendingCount };
    if (state === "fulfilled") {
      if (settledValue === undefined) {
        resultText = "null";
        out.ok = true;
      } else {
        try {
          resultText = stringify(clean(settledValue, "result", "", []));
          out.ok = true;
        } catch (e) {
          if (e instanceof Invalid) {
            out.ok = false;
            out.message = e.message;
          } else if (e instanceof RangeError) {
            out.ok = false;
            out.message = "result is nested too deeply to be checked as JSON";
          } else {
            out.state = "rejected";
            out.error = describeRejection(e);
          }
        }
      }
    } else if (state === "rejected") {
      out.error = describeRejection(rejection);
    }
    out.oom = oomSeen;
    out.nullCaught = nullCaught;
    return stringify(out);
  }

  return function host(command, argument) {
    switch (command) {
      case "start": start(argument); return "null";
      case "settle": settle(argument); return "null";
      case "finish": return finish();
      case "result": return resultText;
      default: throw new Error("unknown host command " + command);
    }
  };
})
