// The per-attempt prelude of the script worker (spec §3.3, §3.4, §3.6, §4.4, §4.5).
//
// Evaluated once in every fresh QuickJS context, before the script. The host pads
// this text with blank lines so that no prelude frame shares a line number with the
// script (whose lines are 2 .. scriptLines + 1): a stack frame inside that range is
// a script frame, so error lines map to cell lines without guessing.
//
// The expression below is a function of the host's emit callable and the lazy
// parts; it returns one dispatcher `host(command, argument)` that the worker calls.
// Every string handed back to Python comes out of JSON.stringify or
// Array.prototype.join: QuickJS may hand other strings over as ropes Python cannot
// read.
//
// This file holds only what every attempt needs. Console formatting, the services
// bridge and the result validator are in prelude-console.js, prelude-services.js and
// prelude-results.js; each is set up in the attempt's context the first time the
// attempt needs it (see `lib`). The worker hands them over either as functions
// (read with this file from bytecode, see _bytecode.py) or as source text, which
// is then compiled on first use: compiling costs about 1 µs per 25 bytes.
(function (emitRaw, parts) {
  "use strict";

  // Intrinsics are captured now: the script may replace globals, and neither this
  // code nor a lazy part compiled later may run the script's replacements.
  const { keys, freeze, isFrozen, getPrototypeOf, defineProperty } = Object;
  const { apply, construct } = Reflect;
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const isFiniteNumber = Number.isFinite;
  const join = Array.prototype.join;
  const StringProto = String.prototype;
  const { isWellFormed, toWellFormed, slice, repeat, split } = StringProto;
  const promiseThen = Promise.prototype.then;
  const fnToString = Function.prototype.toString;
  const weakGet = WeakMap.prototype.get;
  const weakSet = WeakMap.prototype.set;
  const InternalErrorProto = InternalError.prototype;
  const ErrorCtor = Error;
  const PromiseCtor = Promise;
  const RealDate = Date;
  const perf = performance;
  const perfNowFn = performance.now;
  const g = globalThis;
  const evaluate = g.eval; // called by name through a const: an indirect, global eval
  const I = freeze({
    keys, freeze, getPrototypeOf, defineProperty, apply, stringify, parse, join,
    isWellFormed, toWellFormed, slice, isFiniteNumber,
    isArray: Array.isArray, isView: ArrayBuffer.isView, push: Array.prototype.push,
    charCodeAt: StringProto.charCodeAt, toUpperCase: StringProto.toUpperCase,
    numberToString: Number.prototype.toString, test: RegExp.prototype.test,
    objectToString: Object.prototype.toString, max: Math.max,
    ObjectProto: Object.prototype, ArrayProto: Array.prototype, PromiseCtor,
    ErrorCtor, TypeErrorCtor: TypeError, RangeErrorCtor: RangeError, StringCtor: String,
    MapCtor: Map, SetCtor: Set, WeakMapCtor: WeakMap, WeakSetCtor: WeakSet,
    ArrayBufferCtor: ArrayBuffer, toStringTag: Symbol.toStringTag,
  });

  // Set by `configure`, once per attempt.
  let LAST_LINE = 1;
  let settings = null;
  let context = null;
  let attempt = null;
  let services = null;
  let expectedLength = -1;

  // ---- lazy parts: set up in this context on first use ----
  const loaded = { __proto__: null };
  function lib(name) {
    let part = loaded[name];
    if (part === undefined) {
      let make = parts[name];
      if (typeof make === "string") {
        // Padded below the script's lines, like this prelude, so its frames never
        // look like script frames.
        make = evaluate(apply(repeat, "\n", [LAST_LINE + 1]) + make);
      }
      part = make(I, emitRaw, settings);
      loaded[name] = part;
    }
    return part;
  }

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
          && err.message === "out of memory") {
        oomSeen = true;
      }
      // The line is the first script frame, skipping the constructors of an Error
      // subclass: `throw new PaymentError(...)` is reported where it is thrown.
      let line = null;
      let leading = true;
      let found = false;
      const parts = [];
      for (let i = 0; i < frames.length; i++) {
        const f = frames[i];
        const ln = f.getLineNumber();
        const file = f.getFileName();
        parts[i] = "    at " + (f.getFunctionName() || "<anonymous>") + " (" + file
          + ":" + ln + ":" + f.getColumnNumber() + ")";
        if (found) continue;
        const inScript = file === "<input>" && ln >= 2 && ln <= LAST_LINE;
        if (leading && f.isConstructor()) {
          if (inScript && line === null) line = ln;
          continue;
        }
        leading = false;
        if (inScript) {
          line = ln;
          found = true;
        }
      }
      if (line !== null) apply(weakSet, errorLines, [err, line]);
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
  let clockBase = 0;
  let perfBase = 0;
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

  // ---- console (spec §4.4); formatting and caps are in prelude-console.js ----
  const log = (level, args) => lib("console").log(level, args);
  const consoleObject = freeze({
    log: (...a) => log("log", a),
    info: (...a) => log("info", a),
    warn: (...a) => log("warn", a),
    error: (...a) => log("error", a),
    debug: (...a) => log("log", a),
  });

  // ---- services (spec §4.1, §4.4): stubs; the bridge is in prelude-services.js ----
  function buildServices(names) {
    const root = {};
    for (let i = 0; i < names.length; i++) {
      const name = names[i];
      const path = apply(split, name, ["."]);
      let node = root;
      for (let j = 0; j < path.length - 1; j++) {
        if (node[path[j]] === undefined) node[path[j]] = {};
        node = node[path[j]];
      }
      // Created in the stub so its stack records the script line of the call (§3.2).
      node[path[path.length - 1]] = (...args) => {
        const carrier = new ErrorCtor("services." + name + " failed");
        return lib("services").call(name, args, carrier);
      };
    }
    return deepFreeze(root);
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

  function configure(text) {
    const config = parse(text);
    LAST_LINE = config.scriptLines + 1;
    setClock(config.nowMs);
    settings = freeze({
      maxLogLines: config.maxLogLines, maxLogChars: config.maxLogChars, setClock,
    });
    context = deepFreeze(parse(config.context));
    attempt = deepFreeze(parse(config.attempt));
    services = buildServices(config.services);
    expectedLength = config.expectedLength;
  }

  // ---- running and reporting ----
  let started = false;
  let state = "pending";
  let settledValue;
  let rejection;

  function start(main) {
    if (started) throw new Error("an attempt runs its script once");
    started = true;
    if (typeof main !== "function" || apply(fnToString, main, []).length !== expectedLength) {
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
      const isError = r instanceof ErrorCtor;
      const name = isError || typeof r.name === "string"
        ? safeString(() => r.name, "Error") : (typeof r === "function" ? "function" : "object");
      const message = isError || typeof r.message === "string"
        ? safeString(() => r.message, "")
        : safeString(() => lib("console").formatArg(r), "");
      return { name, message, line: line === undefined ? null : line, isNull: false };
    }
    return { name: typeof r, message: safeString(() => r, ""), line: null, isNull: false };
  }

  // A result that is JSON as it stands, without walking it (spec §3.3).
  function isPlainScalar(v) {
    return v === null || typeof v === "boolean" || (typeof v === "number" && isFiniteNumber(v))
      || (typeof v === "string" && apply(isWellFormed, v, []));
  }

  let resultText = null;

  function finish() {
    const out = { state, oom: oomSeen, nullCaught, pendingCalls: 0 };
    if (loaded.services !== undefined) out.pendingCalls = loaded.services.pendingCount();
    if (state === "fulfilled") {
      try {
        if (settledValue === undefined) {
          resultText = "null";
        } else if (isPlainScalar(settledValue)) {
          resultText = stringify(settledValue);
        } else {
          const checked = lib("results").check(settledValue);
          if (checked.text === undefined) {
            out.ok = false;
            out.message = checked.message;
          } else {
            resultText = checked.text;
          }
        }
        if (out.ok === undefined) out.ok = true;
      } catch (e) {
        out.state = "rejected";
        out.error = describeRejection(e);
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
      case "configure": configure(argument); return "null";
      case "start": start(argument); return "null";
      case "settle": lib("services").settle(argument); return "null";
      case "finish": return finish();
      case "result": return resultText;
      default: throw new Error("unknown host command " + command);
    }
  };
})
