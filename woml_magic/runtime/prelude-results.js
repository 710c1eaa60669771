// The result validator of one attempt (spec §3.3), a lazy part of prelude.js:
// compiled in the attempt's context when a script returns an object or an array
// (scalars are checked by prelude.js itself). It writes the result's JSON text, or
// names the first path that is not a JSON value or lies deeper than max_json_depth.
// `I` holds the intrinsics prelude.js captured before the script ran.
(function (I) {
  "use strict";
  const { apply, stringify, join, keys, getPrototypeOf, test } = I;
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

  // Not an Error: building it calls no stack hook, and the script cannot make one.
  function Invalid(message) {
    this.message = message;
  }
  Invalid.prototype = { __proto__: null };

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

  // The JSON text of `value`, or throws Invalid naming the first path that is not a
  // JSON value. Written piece by piece into a null-prototype list: nothing here calls
  // JSON.stringify on an object, whose `toJSON` lookup the script may have patched.
  function write(out, value, path, key, ancestors, depth, maxDepth) {
    let v = value;
    if (v !== null && (typeof v === "object" || typeof v === "bigint") && typeof v.toJSON === "function") {
      v = v.toJSON(key);
    }
    if (v === null) { put(out, "null"); return; }
    if (typeof v === "boolean") { put(out, v ? "true" : "false"); return; }
    if (typeof v === "undefined") throw new Invalid(path + " is undefined");
    if (typeof v === "number") {
      if (isFiniteNumber(v)) { put(out, stringify(v)); return; }
      throw new Invalid(path + " is " + StringCtor(v));
    }
    if (typeof v === "string") {
      const bad = apply(isWellFormed, v, []) ? null : loneSurrogate(v, path);
      if (bad !== null) throw bad;
      put(out, stringify(v));
      return;
    }
    if (typeof v !== "object") throw new Invalid(path + " is " + describeKind(v));
    if (depth >= maxDepth) {
      throw new Invalid(path + " is nested more than " + maxDepth
        + " levels deep; the limit is " + maxDepth + " (max_json_depth)");
    }
    for (let i = 0; i < ancestors.length; i++) {
      if (ancestors[i] === v) {
        throw new Invalid(path + " is a cycle back to " + ancestors.paths[i]);
      }
    }
    const proto = getPrototypeOf(v);
    ancestors[ancestors.length] = v;
    ancestors.paths[ancestors.length] = path;
    ancestors.length += 1;
    if (isArray(v) && proto === ArrayProto) {
      put(out, "[");
      const n = v.length;
      for (let i = 0; i < n; i++) {
        if (!(i in v)) throw new Invalid(pathOf(path, i) + " is an empty array slot");
        if (i > 0) put(out, ",");
        write(out, v[i], pathOf(path, i), StringCtor(i), ancestors, depth + 1, maxDepth);
      }
      put(out, "]");
    } else if (proto === ObjectProto || proto === null) {
      put(out, "{");
      const ks = keys(v);
      for (let i = 0; i < ks.length; i++) {
        const k = ks[i];
        if (i > 0) put(out, ",");
        put(out, stringify(k));
        put(out, ":");
        write(out, v[k], pathOf(path, k), k, ancestors, depth + 1, maxDepth);
      }
      put(out, "}");
    } else {
      throw new Invalid(path + " is " + describeKind(v));
    }
    ancestors.length -= 1;
  }

  function put(out, piece) {
    out[out.length] = piece;
    out.length += 1;
  }

  // [true, JSON text] for a valid result, [false, message] naming what is not JSON;
  // other errors (a throwing getter or toJSON) propagate to the caller.
  function check(value, maxDepth) {
    const out = { __proto__: null, length: 0 };
    const ancestors = { __proto__: null, length: 0, paths: { __proto__: null } };
    try {
      write(out, value, "result", "", ancestors, 0, maxDepth);
      return [true, apply(join, out, [""])];
    } catch (e) {
      if (e instanceof Invalid) return [false, e.message];
      if (e instanceof RangeErrorCtor) {
        return [false, "result is nested too deeply to be checked as JSON"];
      }
      throw e;
    }
  }

  return { __proto__: null, check };
})
