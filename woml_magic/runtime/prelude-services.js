// The services bridge of one attempt (spec §4.1, §4.4), a lazy part of prelude.js:
// compiled in the attempt's context on the script's first services.* call. A call
// returns a Promise and asks the host; the host settles it later with `settle`.
// `I` holds the intrinsics prelude.js captured before the script ran.
(function (I, emitRaw, settings) {
  "use strict";
  const { apply, stringify, parse, join, keys, defineProperty } = I;
  const { PromiseCtor, TypeErrorCtor, StringCtor } = I;
  const pending = { __proto__: null };
  let pendingCount = 0;
  let nextCall = 1;

  // `carrier` was created at the call, so its stack records the script's line.
  function call(name, args, carrier) {
    let argsText;
    try {
      argsText = stringify(args);
    } catch (e) {
      return apply(PromiseCtor.reject, PromiseCtor, [new TypeErrorCtor(
        "services." + name + " arguments must be JSON values: " + StringCtor(e && e.message))]);
    }
    const id = nextCall++;
    return new PromiseCtor((resolve, reject) => {
      pending[id] = { resolve, reject, carrier };
      pendingCount += 1;
      emitRaw(apply(join, [
        '{"type":"call","id":', stringify(id), ',"service":', stringify(name),
        ',"args":', argsText, "}",
      ], [""]));
    });
  }

  function settle(text) {
    const m = parse(text);
    settings.setClock(m.nowMs);
    const p = pending[m.id];
    if (p === undefined) return;
    delete pending[m.id];
    pendingCount -= 1;
    if (m.ok) {
      p.resolve(m.value);
      return;
    }
    const e = p.carrier;
    defineProperty(e, "name", { value: StringCtor(m.name), writable: true, configurable: true });
    defineProperty(e, "message", {
      value: StringCtor(m.message), writable: true, configurable: true,
    });
    const props = m.props || {};
    const names = keys(props);
    for (let i = 0; i < names.length; i++) {
      if (names[i] !== "name" && names[i] !== "message") e[names[i]] = props[names[i]];
    }
    p.reject(e);
  }

  return { call, settle, pendingCount: () => pendingCount };
})
