// The services bridge of one attempt (spec §4.1, §4.4), a lazy part of prelude.js:
// compiled in the attempt's context on the script's first services.* call. A call
// returns a Promise and asks the host; the host settles it later with `settle`.
// `I` holds the intrinsics prelude.js captured before the script ran. The script's
// arguments go out as their JSON text (the script's own data, which it may shape as
// it likes); the worker checks their size and depth and builds the message itself.
(function (I, emitRaw, settings) {
  "use strict";
  const { apply, stringify, parse, join, keys, defineProperty, slice } = I;
  const { PromiseCtor, TypeErrorCtor, RangeErrorCtor, StringCtor, promiseReject } = I;
  const pending = { __proto__: null };
  let pendingCount = 0;
  let nextCall = 1;

  function rejectNow(error) {
    return apply(promiseReject, PromiseCtor, [error]);
  }

  // `carrier` was created at the call, so its stack records the script's line.
  function call(name, args, carrier) {
    let argsText;
    try {
      argsText = stringify(args);
    } catch (e) {
      let why;
      try { why = StringCtor(e && e.message); } catch { why = "it could not be encoded"; }
      return rejectNow(new TypeErrorCtor(
        "services." + name + " arguments must be JSON values: " + why));
    }
    if (typeof argsText !== "string") {
      return rejectNow(new TypeErrorCtor("services." + name + " arguments must be JSON values"));
    }
    const id = nextCall++;
    // "" accepted; "T…" or "R…": refused, a TypeError or RangeError with that message.
    const verdict = emitRaw("call", id, name, apply(join, [argsText], [""]));
    if (verdict !== "") {
      const message = apply(slice, verdict, [1]);
      const ctor = apply(slice, verdict, [0, 1]) === "R" ? RangeErrorCtor : TypeErrorCtor;
      return rejectNow(new ctor(message));
    }
    return new PromiseCtor((resolve, reject) => {
      pending[id] = { __proto__: null, resolve, reject, carrier };
      pendingCount += 1;
    });
  }

  // meta: [id, ok, nowMs, name, message] from the worker; body: the value's JSON
  // text when ok, else the rejection's props as a JSON object text.
  function settle(metaText, body) {
    const m = parse(metaText);
    settings.setClock(m[2]);
    const p = pending[m[0]];
    if (p === undefined) return;
    delete pending[m[0]];
    pendingCount -= 1;
    if (m[1]) {
      p.resolve(parse(body));
      return;
    }
    const e = p.carrier;
    defineProperty(e, "name", { __proto__: null, value: StringCtor(m[3]), writable: true, configurable: true });
    defineProperty(e, "message", { __proto__: null,
      value: StringCtor(m[4]), writable: true, configurable: true,
    });
    const props = parse(body);
    const names = keys(props);
    for (let i = 0; i < names.length; i++) {
      if (names[i] !== "name" && names[i] !== "message") {
        defineProperty(e, names[i], { __proto__: null,
          value: props[names[i]], writable: true, enumerable: true, configurable: true,
        });
      }
    }
    p.reject(e);
  }

  return { __proto__: null, call, settle, pendingCount: () => pendingCount };
})
