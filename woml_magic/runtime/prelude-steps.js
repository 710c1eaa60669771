// `context.steps` of one attempt (spec §3.6), a lazy part of prelude.js set up by
// `configure` only when earlier steps have results: results are fetched from the kernel
// the first time the script reads them, so an attempt costs the same in step 10,000
// as in step 2. It behaves as a frozen plain object: reading a step asks for that step
// only; anything that needs them all (keys, spreading, isFrozen, writes) fetches them
// all once and answers from a frozen copy. `I` holds the intrinsics prelude.js
// captured before the script ran.
(function (I, emitRaw, deepFreeze) {
  "use strict";
  const { apply, join, parse, keys, freeze, defineProperty, slice, indexOf } = I;
  const { RangeErrorCtor } = I;
  // Captured here, when the worker sets the context up: still before any of the
  // script's own code runs (a script that breaks out of its function is refused before
  // this proxy is ever used).
  const ProxyCtor = Proxy;
  const reflect = {
    __proto__: null,
    get: Reflect.get, has: Reflect.has, ownKeys: Reflect.ownKeys,
    getOwnPropertyDescriptor: Reflect.getOwnPropertyDescriptor,
    defineProperty: Reflect.defineProperty, deleteProperty: Reflect.deleteProperty,
    isExtensible: Reflect.isExtensible, preventExtensions: Reflect.preventExtensions,
    getPrototypeOf: Reflect.getPrototypeOf, setPrototypeOf: Reflect.setPrototypeOf,
  };
  const fetched = { __proto__: null };
  const target = {};
  let whole = false;

  // "" absent; "!" + message: refused (too large for this attempt); else JSON.
  function fetch(name) {
    const text = emitRaw("need", apply(join, [name], [""]));
    if (typeof text !== "string" || text === "") return undefined;
    if (apply(indexOf, text, ["!"]) === 0) throw new RangeErrorCtor(apply(slice, text, [1]));
    return deepFreeze(parse(text));
  }
  function all() {
    if (!whole) {
      const text = emitRaw("need", "");
      if (typeof text === "string" && apply(indexOf, text, ["!"]) === 0) {
        throw new RangeErrorCtor(apply(slice, text, [1]));
      }
      const every = parse(text);
      const names = keys(every);
      for (let i = 0; i < names.length; i++) {
        defineProperty(target, names[i], {
          __proto__: null, value: deepFreeze(every[names[i]]), enumerable: true,
          writable: false, configurable: false,
        });
      }
      freeze(target);
      whole = true;
    }
    return target;
  }
  function one(key) {
    if (typeof key !== "string") return undefined;
    if (key in fetched) return fetched[key];
    const value = fetch(key);
    fetched[key] = value;
    return value;
  }
  return new ProxyCtor(target, {
    __proto__: null,
    get(t, key, receiver) {
      if (whole) return reflect.get(t, key, receiver);
      const value = one(key);
      return value === undefined ? reflect.get(t, key, receiver) : value;
    },
    has(t, key) {
      if (!whole && one(key) !== undefined) return true;
      return reflect.has(t, key);
    },
    ownKeys() { return reflect.ownKeys(all()); },
    getOwnPropertyDescriptor(t, key) { return reflect.getOwnPropertyDescriptor(all(), key); },
    defineProperty(t, key, d) { return reflect.defineProperty(all(), key, d); },
    deleteProperty(t, key) { return reflect.deleteProperty(all(), key); },
    set() { all(); return false; },
    isExtensible() { return reflect.isExtensible(all()); },
    preventExtensions() { return reflect.preventExtensions(all()); },
    getPrototypeOf(t) { return reflect.getPrototypeOf(t); },
    setPrototypeOf(t, p) { return reflect.setPrototypeOf(all(), p); },
  });
})
