// The per-attempt prelude of the script worker (spec §3.3, §3.4, §3.6, §4.4, §4.5).
//
// Evaluated once in every fresh QuickJS context, before the script. The host pads
// this text with blank lines so that no prelude frame shares a line number with the
// script (whose JS lines are firstLine .. lastLine, given by `configure`; see
// wrapper.py): a stack frame inside that range is a script frame, so error lines map
// to cell lines without guessing.
//
// The expression below is a function of the host's emit callable, the lazy parts and
// the worker's fixed names and texts (`fixed`, _contexts.prelude_source); it returns
// one dispatcher `host(command, ...)` that the worker calls.
//
// The bridge is built so that the script cannot speak on it (spec §4.5):
// - nothing here ever serialises an object: JSON.stringify consults `toJSON` through
//   the prototype chain, which the script may have patched. Only primitives are
//   stringified, and texts are assembled with Array.prototype.join on arrays whose
//   elements are own properties (array literals) or null-prototype objects;
// - `emitRaw` takes primitives only (a kind, then strings and numbers); the worker
//   builds and encodes every message itself;
// - internal records are null-prototype objects or closure variables, so no read of
//   a missing field can reach a getter the script put on Object.prototype;
// - every intrinsic is captured now, before the script can replace it.
// Every string handed to Python comes out of JSON.stringify or Array.prototype.join:
// QuickJS may hand other strings over as ropes Python cannot read.
//
// This file holds only what every attempt needs. Console formatting, the services
// bridge, the result validator and the checks of services.secret and btoa are in
// prelude-console.js, prelude-services.js, prelude-results.js and prelude-secrets.js;
// each is set up in the attempt's context the first time the attempt needs it (see
// `lib`). The worker reads each from its own bytecode then (`parts` is null; see
// `factory`, _bytecode.py), or hands over their source texts, compiled on first use:
// compiling costs about 1 µs per 25 bytes.
(function (emitRaw, parts, fixed) {
  "use strict";

  const { keys, freeze, isFrozen, getPrototypeOf, defineProperty } = Object;
  const { apply, construct } = Reflect;
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const isFiniteNumber = Number.isFinite;
  const join = Array.prototype.join;
  const StringProto = String.prototype;
  const { isWellFormed, toWellFormed, slice, repeat, split, indexOf } = StringProto;
  const promiseThen = Promise.prototype.then;
  const fnToString = Function.prototype.toString;
  const weakGet = WeakMap.prototype.get;
  const weakSet = WeakMap.prototype.set;
  const InternalErrorProto = InternalError.prototype;
  const ErrorCtor = Error;
  const RangeErrorCtor = RangeError;
  const TypeErrorCtor = TypeError;
  const SyntaxErrorCtor = SyntaxError;
  const StringCtor = String;
  const PromiseCtor = Promise;

  const RealDate = Date;
  const perf = performance;
  const perfNowFn = performance.now;
  const g = globalThis;
  const evaluate = g.eval; // called by name through a const: an indirect, global eval
  // The names by which the worker handed over the emit callable and gets `host`: gone
  // before any script is even compiled (the emit global now, `host`'s at `configure`).
  delete g[fixed.emitGlobal];
  const hostGlobal = fixed.hostGlobal;
  // Only the lazy parts use these, but they are captured now, before the script runs.
  const { isArray } = Array;
  const { isView } = ArrayBuffer;
  const { charCodeAt, toUpperCase } = StringProto;
  const numberToString = Number.prototype.toString;
  const test = RegExp.prototype.test;
  const ObjectProto = Object.prototype;
  const objectToString = ObjectProto.toString;
  const ArrayProto = Array.prototype;
  const promiseReject = Promise.reject;
  const MapCtor = Map;
  const SetCtor = Set;
  const WeakMapCtor = WeakMap;
  const WeakSetCtor = WeakSet;
  const ArrayBufferCtor = ArrayBuffer;
  const { toStringTag } = Symbol;
  // What the parts get: made the first time one is set up (most attempts never need
  // one, and an object of forty properties costs microseconds in a fresh context). Parts
  // read it after the script has run: no name may fall through to a prototype.
  let I = null;
  function intrinsics() {
    if (I === null) {
      I = freeze({
        __proto__: null,
        keys, freeze, getPrototypeOf, defineProperty, apply, stringify, parse, join,
        isWellFormed, toWellFormed, slice, isFiniteNumber, isArray, isView, charCodeAt,
        toUpperCase, numberToString, test, objectToString, ObjectProto, ArrayProto,
        PromiseCtor, promiseReject, ErrorCtor, TypeErrorCtor, RangeErrorCtor, StringCtor,
        MapCtor, SetCtor, WeakMapCtor, WeakSetCtor, ArrayBufferCtor, toStringTag, indexOf,
      });
    }
    return I;
  }

  // A string Python can read: flat, never a rope (see above).
  function flat(s) {
    return apply(join, [s], [""]);
  }

  // Native `then` consults `this.constructor[Symbol.species]` to build its result
  // promise; locked, so the script cannot hook the prelude's own `then` calls.
  defineProperty(PromiseCtor.prototype, "constructor", {
    value: PromiseCtor, writable: false, enumerable: false, configurable: false,
  });
  defineProperty(PromiseCtor, Symbol.species, {
    get() { return PromiseCtor; }, enumerable: false, configurable: false,
  });

  // The script's first JS line (wrapper.py); its last line and how many blank lines put
  // code below it (wrapper.py `padding`) are set by `configure`, once per attempt.
  const FIRST_LINE = fixed.firstLine;
  let LAST_LINE = 0;
  let PAD_LINES = 0;
  let settings = null;
  // The script's arguments; `attempt`, `services` and `console` stay undefined for a
  // script that cannot name them (wrapper.py `reach_of`).
  let context = null;
  let attempt;
  let services;
  let consoleObject;
  const closesEarly = fixed.closesEarly;  // why a script that closes its function is refused
  const mainGlobal = fixed.mainGlobal;  // where the worker's bytecode puts `main` (_contexts.Scripts)

  // ---- lazy parts: set up in this context on first use ----
  const loaded = { __proto__: null };
  function lib(name) {
    let part = loaded[name];
    if (part === undefined) {
      part = factory(name)(intrinsics(), emitRaw, settings);
      loaded[name] = part;
    }
    return part;
  }

  // A part's function. With `parts` null the worker reads the part's bytecode into this
  // context and puts the function in a holder only this code ever sees; reading fails
  // only when memory runs out, and the attempt is then a crash (spec §3.2). Otherwise
  // `parts` holds the source texts, compiled here.
  function factory(name) {
    if (parts === null) {
      const holder = { __proto__: null };
      if (emitRaw("part", name, holder) !== "") {
        oomSeen = true;
        throw new ErrorCtor("out of memory");
      }
      return holder.part;
    }
    // Padded below the script's lines, like this prelude, so its frames never look
    // like script frames.
    return evaluate(apply(repeat, "\n", [PAD_LINES]) + parts[name]);
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
      const out = { __proto__: null, length: 0 };
      for (let i = 0; i < frames.length; i++) {
        const f = frames[i];
        const ln = f.getLineNumber();
        const file = f.getFileName();
        out[i] = "    at " + (f.getFunctionName() || "<anonymous>") + " (" + file
          + ":" + ln + ":" + f.getColumnNumber() + ")";
        out.length = i + 1;
        if (found) continue;
        const inScript = file === "<input>" && ln >= FIRST_LINE && ln <= LAST_LINE;
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
      return apply(join, out, ["\n"]);
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
  // throws `null` when memory is so tight that it cannot even build the error. It
  // reaches the script's code as a constant of the block around it, under a random
  // name (see `arm`, wrapper.wrap_with_hook): there is no global for the script to call.
  function caught(e) {
    if (e === null) {
      nullCaught = true;
    } else if (!oomSeen && isEngineOom(e)) {
      oomSeen = true;
    }
    return e;
  }

  // Whether `e` is the engine's out-of-memory error. One whose stack could not be built
  // never met the hook; one whose message and stack could not even be added is a bare
  // InternalError with no own property (seen caught at 16 MiB when the bomb's last
  // allocation left room for the error object alone), which no engine error is
  // otherwise. (A script can build one on purpose, as it can `throw null`: it
  // chooses `crash`.)
  function isEngineOom(e) {
    if (e === null || typeof e !== "object") return false;
    try {
      return getPrototypeOf(e) === InternalErrorProto && (e.message === "out of memory"
        || (!apply(hasOwn, e, ["message"]) && !apply(hasOwn, e, ["stack"])));
    } catch {
      return false;  // not an engine error then
    }
  }
  // Promise rejection handlers see the same `null` and bare errors.
  Promise.prototype.then = function then(onFulfilled, onRejected) {
    if (typeof onRejected === "function") {
      const handler = onRejected;
      onRejected = function (reason) {
        if (reason === null) nullCaught = true;
        else if (!oomSeen && isEngineOom(reason)) oomSeen = true;
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
  function makeConsole() {
    return freeze({
      log: (...a) => log("log", a),
      info: (...a) => log("info", a),
      warn: (...a) => log("warn", a),
      error: (...a) => log("error", a),
      debug: (...a) => log("log", a),
    });
  }

  // ---- services.secret and btoa (spec §10.1); their checks are in prelude-secrets.js ----
  function secretStub(secretNames) {
    return function secret(...args) {
      return lib("secrets").secret(secretNames, args);
    };
  }
  const nativeBtoa = g.btoa;
  if (typeof nativeBtoa === "function") {
    defineProperty(g, "btoa", {
      __proto__: null, writable: true, enumerable: false, configurable: true,
      value: function btoa(data) {
        return apply(nativeBtoa, g, [lib("secrets").btoaText(data)]);
      },
    });
  }

  // ---- services (spec §4.1, §4.4): stubs; the bridge is in prelude-services.js ----
  function buildServices(names, secretNames) {
    const root = {};
    for (let i = 0; i < names.length; i++) {
      const name = names[i];
      const path = apply(split, name, ["."]);
      let node = root;
      for (let j = 0; j < path.length - 1; j++) {
        if (!apply(hasOwn, node, [path[j]])) {
          defineProperty(node, path[j], { __proto__: null, value: {}, enumerable: true, writable: true });
        }
        node = node[path[j]];
      }
      // Created in the stub so its stack records the script line of the call (§3.2).
      defineProperty(node, path[path.length - 1], { __proto__: null,
        value: name === "secret" ? secretStub(secretNames) : (...args) => {
          const carrier = new ErrorCtor("services." + name + " failed");
          return lib("services").call(name, args, carrier);
        },
        enumerable: true, writable: true,
      });
    }
    return deepFreeze(root);
  }
  const hasOwn = Object.prototype.hasOwnProperty;

  // ---- frozen inputs (spec §3.4, §3.6) ----
  function deepFreeze(v) {
    if (v !== null && typeof v === "object" && !isFrozen(v)) {
      freeze(v);
      const ks = keys(v);
      for (let i = 0; i < ks.length; i++) deepFreeze(v[ks[i]]);
    }
    return v;
  }

  // The attempt's inputs, as primitives and JSON texts (_runner.py); `attemptText` and
  // `servicesText` are null, and `withConsole` false, for a script that cannot name
  // them. `context.steps` is prelude-steps.js's proxy, set up only when earlier steps
  // have results (most attempts never load that part). Runs before the
  // script is compiled.
  function configure(lastLine, padLines, nowMs, contextText, attemptText, payloadText,
                     servicesText, secretsText, withConsole, maxLogLines, maxLogChars,
                     maxDepth, stepCount) {
    delete g[hostGlobal];
    LAST_LINE = lastLine;
    PAD_LINES = padLines;
    setClock(nowMs);
    settings = freeze({ __proto__: null, maxLogLines, maxLogChars, maxDepth, setClock });
    const given = parse(contextText);
    const ctx = {};
    const put = (name, value) => defineProperty(ctx, name, { __proto__: null,
      value, enumerable: true, writable: true, configurable: true,
    });
    put("payload", deepFreeze(parse(payloadText)));
    // No proxy for a run's first step (or a lone step): nothing to fetch.
    put("steps", stepCount > 0 ? factory("steps")(intrinsics(), emitRaw, deepFreeze) : freeze({}));
    const names = keys(given);
    for (let i = 0; i < names.length; i++) {
      if (names[i] !== "steps") put(names[i], deepFreeze(given[names[i]]));
    }
    context = freeze(ctx);
    if (attemptText !== null) attempt = deepFreeze(parse(attemptText));
    if (servicesText !== null) services = buildServices(parse(servicesText), parse(secretsText));
    if (withConsole) consoleObject = makeConsole();
  }

  // ---- running and reporting ----
  let started = false;
  let state = "pending";
  let settledValue;
  let rejection;

  // `expectedLength`: the length of the function's text as the worker wrapped it; any
  // other length means the script closed its function early (wrapper.py).
  function start(main, expectedLength) {
    if (started) throw new ErrorCtor("an attempt runs its script once");
    started = true;
    delete g[mainGlobal];
    if (typeof main !== "function" || apply(fnToString, main, []).length !== expectedLength) {
      state = "rejected";
      rejection = new SyntaxErrorCtor(closesEarly);
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
      let s = StringCtor(get());
      if (!apply(isWellFormed, s, [])) s = apply(toWellFormed, s, []);
      return s.length > 4096 ? apply(slice, s, [0, 4096]) + "…" : s;
    } catch {
      return fallback;
    }
  }

  // [name, message, line, isNull]: primitives only. Never throws: the rejection may be
  // any value, with throwing getters or proxy traps.
  function describeRejection(r) {
    try {
      return describe(r);
    } catch {
      return ["Error", "a value that could not be described was thrown", null, false];
    }
  }

  function describe(r) {
    if (r === null) return ["null", "null", null, true];
    if (typeof r === "object" || typeof r === "function") {
      const line = apply(weakGet, errorLines, [r]);
      const isError = r instanceof ErrorCtor;
      const has = (key) => {
        try { return typeof r[key] === "string"; } catch { return false; }
      };
      const name = isError || has("name")
        ? safeString(() => r.name, "Error") : (typeof r === "function" ? "function" : "object");
      const message = isError || has("message")
        ? safeString(() => r.message, "")
        : safeString(() => lib("console").formatArg(r), "");
      return [name, message, typeof line === "number" ? line : null, false];
    }
    return [typeof r, safeString(() => r, ""), null, false];
  }

  // A result that is JSON as it stands, without walking it (spec §3.3).
  function isPlainScalar(v) {
    return v === null || typeof v === "boolean" || (typeof v === "number" && isFiniteNumber(v))
      || (typeof v === "string" && apply(isWellFormed, v, []));
  }

  let resultText = null;

  // The attempt's state as a JSON array of primitives:
  // [state, oom, nullCaught, pendingCalls, invalidMessage, errName, errMessage, errLine, isNull]
  function finish() {
    let out = state;
    let invalid = null;
    let error = null;
    const pending = loaded.services !== undefined ? loaded.services.pendingCount() : 0;
    if (state === "fulfilled") {
      try {
        if (settledValue === undefined) {
          resultText = "null";
        } else if (isPlainScalar(settledValue)) {
          resultText = flat(stringify(settledValue));
        } else {
          const checked = lib("results").check(settledValue, settings.maxDepth);
          if (checked[0]) resultText = checked[1];
          else invalid = checked[1];
        }
      } catch (e) {
        out = "rejected";
        error = describeRejection(e);
      }
    } else if (state === "rejected") {
      if (!oomSeen && isEngineOom(rejection)) oomSeen = true;
      error = describeRejection(rejection);
    }
    const fields = [
      stringify(out), oomSeen ? "true" : "false", nullCaught ? "true" : "false",
      stringify(pending), invalid === null ? "null" : stringify(invalid),
      error === null ? "null" : stringify(error[0]),
      error === null ? "null" : stringify(error[1]),
      error === null || error[2] === null ? "null" : stringify(error[2]),
      error !== null && error[3] ? "true" : "false",
    ];
    return apply(join, ["[", apply(join, fields, [","]), "]"], [""]);
  }

  // The arguments come as a rest array, passed on to `configure` by `apply` (never by
  // spreading, which reads the array's iterator: the script may have replaced it).
  return function host(command, ...args) {
    switch (command) {
      case "configure": apply(configure, undefined, args); return "null";
      case "start": start(args[0], args[1]); return "null";
      case "arm":
        defineProperty(g, args[0], {
          __proto__: null, value: caught, configurable: true, enumerable: false,
        });
        return "null";
      case "disarm": delete g[args[0]]; return "null";
      case "settle": lib("services").settle(args[0], args[1]); return "null";
      case "finish": return finish();
      case "result": return resultText;
      default: throw new ErrorCtor("unknown host command " + command);
    }
  };
})
