// The result validator of one attempt (spec §3.3), a lazy part of prelude.js:
// compiled in the attempt's context when a script returns an object or an array
// (scalars are checked by prelude.js itself). It copies the result using JSON values
// only, or names the first path that is not one. `I` holds the intrinsics
// prelude.js captured before the script ran.
(function (I) {
  "use strict";
  const { apply, stringify, keys, getPrototypeOf, defineProperty, push, test } = I;
  const { isWellFormed, isFiniteNumber, isArray, isView, charCodeAt, toUpperCase } = I;
  const { numberToString, StringCtor, ObjectProto, ArrayProto, PromiseCtor } = I;
  const { MapCtor, SetCtor, WeakMapCtor, WeakSetCtor, ArrayBufferCtor, RangeErrorCtor } = I;
  const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

  function pathOf(base, key) {
    if (typeof key === "number") return base + "[" + key + "]";
    return apply(test, IDENT, [key]) ? base + "." + key : base + "[" + stringify(key) + "]";
  }

  function describeKind(v) {
    if (typeof v === "bigint") return "a BigInt (" + StringCtor(v) + "n)";
    if (typeof v === "symbol") return "a Symbol";
    if (typeof v === "function") return "a function";
    if (v instanceof MapCtor) return "a Map";
    if (v instanceof SetCtor) return "a Set";
    if (v instanceof WeakMapCtor) return "a WeakMap";
    if (v instanceof WeakSetCtor) return "a WeakSet";
    if (isView(v) || v instanceof ArrayBufferCtor) {
      return "a " + (v.constructor && v.constructor.name || "binary buffer");
    }
    if (v instanceof PromiseCtor) return "a Promise (did you forget `await`?)";
    const ctor = v.constructor;
    const name = typeof ctor === "function" && ctor.name ? ctor.name : "unnamed class";
    return "an instance of " + name + ", not a plain object";
  }

  class Invalid {
    constructor(message) { this.message = message; }
  }

  function loneSurrogate(v, path) {
    for (let i = 0; i < v.length; i++) {
      const c = apply(charCodeAt, v, [i]);
      const high = c >= 0xd800 && c <= 0xdbff;
      const low = c >= 0xdc00 && c <= 0xdfff;
      if (high) {
        const next = apply(charCodeAt, v, [i + 1]);
        if (next >= 0xdc00 && next <= 0xdfff) { i += 1; continue; }
      }
      if (high || low) {
        const hex = apply(toUpperCase, apply(numberToString, c, [16]), []);
        return new Invalid(path + " contains a lone surrogate (U+" + hex + ") at index " + i);
      }
    }
    return null;
  }

  // A clean copy made only of JSON values, or throws Invalid naming the path.
  function clean(value, path, key, ancestors) {
    let v = value;
    if (v !== null && (typeof v === "object" || typeof v === "bigint") && typeof v.toJSON === "function") {
      v = v.toJSON(key);
    }
    if (v === null || typeof v === "boolean") return v;
    if (typeof v === "undefined") throw new Invalid(path + " is undefined");
    if (typeof v === "number") {
      if (isFiniteNumber(v)) return v;
      throw new Invalid(path + " is " + StringCtor(v));
    }
    if (typeof v === "string") {
      const bad = apply(isWellFormed, v, []) ? null : loneSurrogate(v, path);
      if (bad !== null) throw bad;
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
        out[i] = clean(v[i], pathOf(path, i), StringCtor(i), ancestors);
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

  // {text} for a valid result, {message} naming what is not JSON; other errors
  // (a throwing getter or toJSON) propagate to the caller.
  function check(value) {
    try {
      return { text: stringify(clean(value, "result", "", [])) };
    } catch (e) {
      if (e instanceof Invalid) return { message: e.message };
      if (e instanceof RangeErrorCtor) {
        return { message: "result is nested too deeply to be checked as JSON" };
      }
      throw e;
    }
  }

  return { check };
})
