import {
  Fingerprint,
  Idempotency,
  IdempotencyError,
  IdempotencyKey,
  IdempotencyRecord,
  IdempotencyStore
} from "@effect-idempotency/core"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as FastCheck from "effect/FastCheck"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"

const shuffleKeys = (value: unknown, seed: number): unknown => {
  if (Array.isArray(value)) return value.map((item, i) => shuffleKeys(item, seed + i))
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value)
    // a deterministic rotation of the key order
    const rotated = entries.slice(seed % Math.max(entries.length, 1)).concat(
      entries.slice(0, seed % Math.max(entries.length, 1))
    )
    return Object.fromEntries(rotated.reverse().map(([k, v]) => [k, shuffleKeys(v, seed + 1)]))
  }
  return value
}

describe("Fingerprint", () => {
  it("is tagged with its algorithm and deterministic", () => {
    const a = Fingerprint.fromEncoded({ amount: 10, currency: "EUR" })
    assert.match(a, /^sha256:[0-9a-f]{64}$/)
    assert.strictEqual(Fingerprint.fromEncoded({ amount: 10, currency: "EUR" }), a)
  })

  it("ignores object key order at every depth but not array order", () => {
    assert.strictEqual(
      Fingerprint.fromEncoded({ a: 1, b: { c: [1, 2], d: null } }),
      Fingerprint.fromEncoded({ b: { d: null, c: [1, 2] }, a: 1 })
    )
    assert.notStrictEqual(Fingerprint.fromEncoded({ c: [1, 2] }), Fingerprint.fromEncoded({ c: [2, 1] }))
  })

  it("distinguishes values that differ in type or content", () => {
    const values = [1, "1", true, null, [], {}, { a: 1 }, { a: "1" }, ["a"], { a: undefined, b: 1 }, { b: 2 }]
    const prints = values.map(Fingerprint.fromEncoded)
    assert.strictEqual(new Set(prints).size, values.length)
    // undefined object members are dropped, as JSON drops them
    assert.strictEqual(Fingerprint.fromEncoded({ a: undefined, b: 1 }), Fingerprint.fromEncoded({ b: 1 }))
  })

  it("produces the same canonical text as JSON for key-sorted input", () => {
    const value = { a: [1, "two", { x: true }], b: "é\n\"", c: 1.5e-7 }
    assert.strictEqual(Fingerprint.canonicalJson(value), JSON.stringify(value))
  })

  it.effect("is computed over the schema-encoded payload", () =>
    Effect.gen(function*() {
      const Payload = Schema.Struct({ at: Schema.DateFromString, amount: Schema.NumberFromString })
      const make = Fingerprint.make(Payload)
      const print = yield* make({ at: new Date("2026-01-01T00:00:00.000Z"), amount: 12 })
      assert.strictEqual(print, Fingerprint.fromEncoded({ amount: "12", at: "2026-01-01T00:00:00.000Z" }))
    }))

  it.prop(
    "is invariant under any reordering of object keys",
    [FastCheck.jsonValue(), FastCheck.nat()],
    ([value, seed]) => {
      assert.strictEqual(Fingerprint.fromEncoded(shuffleKeys(value, seed)), Fingerprint.fromEncoded(value))
    },
    { fastCheck: { numRuns: 1000 } }
  )

  it.prop(
    "orders keys by UTF-16 code units, as Array.prototype.sort does, for few keys and many",
    [FastCheck.dictionary(FastCheck.fullUnicodeString({ maxLength: 4 }), FastCheck.integer(), { maxKeys: 40 })],
    ([record]) => {
      const expected = "{" +
        Object.keys(record).sort().map((key) => `${JSON.stringify(key)}:${JSON.stringify(record[key])}`).join(",") +
        "}"
      assert.strictEqual(Fingerprint.canonicalJson(record), expected)
    },
    { fastCheck: { numRuns: 1000 } }
  )

  it.prop("canonical text parses back to an equal value", [FastCheck.jsonValue()], ([value]) => {
    assert.deepStrictEqual(JSON.parse(Fingerprint.canonicalJson(value)), JSON.parse(JSON.stringify(value)))
  }, { fastCheck: { numRuns: 1000 } })
})

class Point {
  constructor(readonly x: number, readonly y: number) {}
}
class Charge extends Schema.Class<Charge>("Charge")({ customerId: Schema.String, amountCents: Schema.Int }) {}

const bare: Record<string, unknown> = Object.create(null)
bare.k = "v"

/**
 * Fingerprints of payloads that were valid and unambiguous before the canonical form refused the
 * values JSON cannot tell apart, computed with the code before that change and checked outside it
 * (`printf '<text>' | sha256sum`): records stored before it must keep matching.
 */
const pinned: ReadonlyArray<readonly [name: string, payload: unknown, text: string, fingerprint: string]> = [
  [
    "a flat object",
    { currency: "EUR", amount: 10 },
    `{"amount":10,"currency":"EUR"}`,
    "sha256:5f19111fbbc74b0d131074d03b389a0125fea1f9d6f001532dad555dc57ca8af"
  ],
  [
    "nested objects and arrays",
    { c: -3, b: [1, "two", { z: null, y: false }], a: 1.5e-7 },
    `{"a":1.5e-7,"b":[1,"two",{"y":false,"z":null}],"c":-3}`,
    "sha256:20ca3db91e01402b191d7c998a350c361041a1d0c031a2942a878d72466549cf"
  ],
  [
    "an undefined member (dropped)",
    { a: undefined, b: 1 },
    `{"b":1}`,
    "sha256:eb8ed3ccb5023093b56f490a46501e88d09736687e609fdbc1c71b3df8b9ccd3"
  ],
  [
    "a Date (its toJSON) and escaped text",
    { at: new Date(0), note: "é€😀\n\"" },
    `{"at":"1970-01-01T00:00:00.000Z","note":"é€😀\\n\\""}`,
    "sha256:75cd2f3f8f1d9fb2aaeb86c3d825ceae3efdedd0b569bfc5f65fc3c369139249"
  ],
  [
    "empty values, -0 and 0",
    [[], {}, "", 0, -0, false, null],
    `[[],{},"",0,0,false,null]`,
    "sha256:34a0bc87844f38bbc80f47877d5baf2ffbc0d03e72d99287bb7ecc45c9bc712b"
  ],
  [
    "no payload (undefined, as null)",
    undefined,
    "null",
    "sha256:74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b"
  ],
  [
    "a class instance (its own fields)",
    new Point(1, 2),
    `{"x":1,"y":2}`,
    "sha256:689a8f1db95402580476e38c264278ce7b1e664320cfb4e9ae8d3a908cf09964"
  ],
  [
    "a Schema.Class instance",
    new Charge({ customerId: "cus_42", amountCents: 1999 }),
    `{"amountCents":1999,"customerId":"cus_42"}`,
    "sha256:5a638695e403b9bae3822b61604604f36989c5e218ef467d20eb29cbd438d7e3"
  ],
  [
    "an Option (its toJSON)",
    Option.some(1),
    `{"_id":"Option","_tag":"Some","value":1}`,
    "sha256:e41ed5b3a3689ef8f6d8a6fd4d9042524fbf32e97f9825126dd86b94b1282d58"
  ],
  [
    "an object without a prototype",
    bare,
    `{"k":"v"}`,
    "sha256:666c1aa02e8068c6d5cc1d3295009432c16790bec28ec8ce119d0d1a18d61319"
  ]
]

describe("Fingerprint: pinned fingerprints of ordinary payloads", () => {
  for (const [name, payload, text, fingerprint] of pinned) {
    it(`${name} keeps its canonical text and fingerprint`, () => {
      assert.strictEqual(Fingerprint.canonicalJson(payload), text)
      assert.strictEqual(Fingerprint.fromEncoded(payload), fingerprint)
    })
  }

  it.effect("the engine records the pinned fingerprint, with a payload schema and without", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const recorded = (key: string) =>
        Effect.map(
          store.get(IdempotencyRecord.makeRecordId({ operation: "charge", key: IdempotencyKey.unsafeMake(key) })),
          (record) => Option.getOrThrow(record).fingerprint
        )
      const payload = { currency: "EUR", amount: 10 }
      const expected = "sha256:5f19111fbbc74b0d131074d03b389a0125fea1f9d6f001532dad555dc57ca8af"
      yield* Effect.succeed(1).pipe(
        Idempotency.once({ operation: "charge", key: "k-1", payload, success: Schema.Number })
      )
      assert.strictEqual(yield* recorded("k-1"), expected)
      const operation = Idempotency.make({
        name: "charge",
        payload: Schema.Struct({ amount: Schema.Number, currency: Schema.String }),
        success: Schema.Number,
        execute: () => Effect.succeed(1)
      })
      yield* operation.run({ key: "k-2", payload })
      assert.strictEqual(yield* recorded("k-2"), expected)
    }).pipe(Effect.provide(IdempotencyStore.layerMemoryWith({ warn: false }))))
})

/**
 * Payloads holding a value JSON would write as another value, with the `InvalidPayload` detail each
 * gets. Where a value could hold a secret, it is `sk_live_secret`: no message may echo it.
 */
const ambiguous: ReadonlyArray<readonly [name: string, payload: unknown, detail: string]> = [
  ["NaN", { amount: NaN }, `["amount"]: expected a finite number`],
  ["Infinity", { amount: Infinity }, `["amount"]: expected a finite number`],
  ["-Infinity", { amount: -Infinity }, `["amount"]: expected a finite number`],
  ["NaN as the whole payload", NaN, "the value: expected a finite number"],
  ["a bigint", { id: 10n }, `["id"]: expected a JSON value, not a bigint`],
  ["a function member", { callback: () => "sk_live_secret" }, `["callback"]: expected a JSON value, not a function`],
  ["a function in an array", { items: [() => 1] }, `["items"][0]: expected a JSON value, not a function`],
  ["a symbol", { tag: Symbol("sk_live_secret") }, `["tag"]: expected a JSON value, not a symbol`],
  ["undefined in an array", { items: [1, undefined] }, `["items"][1]: expected a JSON value, not undefined`],
  ["a hole in an array", { items: new Array<number>(1) }, `["items"][0]: expected a JSON value, not undefined`],
  ["a toJSON that gives undefined", { x: { toJSON: () => undefined } }, `["x"]: expected a JSON value, not undefined`],
  ["an invalid Date", { at: new Date(NaN) }, `["at"]: expected a valid Date`],
  ["a Map", { token: new Map([["k", "sk_live_secret"]]) }, `["token"]: expected a plain object, not a Map`],
  ["a Set", { token: new Set(["sk_live_secret"]) }, `["token"]: expected a plain object, not a Set`],
  ["a subclass of Map", { token: new (class extends Map {})() }, `["token"]: expected a plain object, not a Map`],
  ["a RegExp", { pattern: /sk_live_secret/ }, `["pattern"]: expected a plain object, not a RegExp`],
  ["an Error", { cause: new Error("sk_live_secret") }, `["cause"]: expected a plain object, not an Error`],
  ["binary data", { bytes: new Uint8Array([1, 2]) }, `["bytes"]: expected a plain object, not binary data`],
  ["a boxed primitive", { text: Object("sk_live_secret") }, `["text"]: expected a plain object, not a boxed string`]
]

describe("Fingerprint: values JSON cannot tell apart", () => {
  it("are refused with a ParseError that names where and what, never the value", () => {
    for (const [name, payload, detail] of ambiguous) {
      const result = Fingerprint.fromEncodedEither(payload)
      assert.isTrue(Either.isLeft(result), name)
      const error = Either.getLeft(result).pipe(Option.getOrThrow)
      assert.isTrue(ParseResult.isParseError(error), name)
      assert.strictEqual(IdempotencyError.describeParseError(error), detail, name)
      assert.notInclude(error.message, "sk_live", name)
      assert.throws(() => Fingerprint.fromEncoded(payload))
      assert.throws(() => Fingerprint.canonicalJson(payload))
    }
  })

  it("a path deeper than eight keys is cut short", () => {
    let deep: unknown = NaN
    for (let i = 9; i >= 0; i--) deep = { [`k${i}`]: deep }
    const error = Either.getLeft(Fingerprint.fromEncodedEither(deep)).pipe(Option.getOrThrow)
    assert.strictEqual(
      IdempotencyError.describeParseError(error),
      `["k0"]["k1"]["k2"]["k3"]["k4"]["k5"]["k6"]["k7"]["..."]: expected a finite number`
    )
  })

  it.effect("a payload schema that encodes NaN is refused the same way", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Fingerprint.make(Schema.Struct({ amount: Schema.Number }))({ amount: NaN }))
      assert.strictEqual(IdempotencyError.describeParseError(error), `["amount"]: expected a finite number`)
    }))

  for (const [name, payload, detail] of ambiguous) {
    it.effect(`${name}: once fails with InvalidPayload and does not run the effect`, () =>
      Effect.gen(function*() {
        const runs = yield* Ref.make(0)
        const error = yield* Effect.flip(
          Ref.updateAndGet(runs, (n) => n + 1).pipe(
            Idempotency.once({ operation: "charge", key: "k", payload, success: Schema.Number })
          )
        )
        assert.instanceOf(error, IdempotencyError.InvalidPayload)
        assert.strictEqual((error as IdempotencyError.InvalidPayload).detail, detail)
        assert.notInclude(error.message, "sk_live")
        assert.strictEqual(yield* Ref.get(runs), 0)
      }).pipe(Effect.provide(IdempotencyStore.layerMemoryWith({ warn: false }))))
  }
})

describe("Fingerprint: a retry with a payload JSON would confuse with the first does not replay", () => {
  /** `once` without a payload schema, around a downstream that counts its runs. */
  const counted = Effect.map(Ref.make(0), (runs) => ({
    runs,
    run: (payload: unknown) =>
      Idempotency.result(
        Ref.updateAndGet(runs, (n) => n + 1).pipe(
          Idempotency.once({ operation: "charge", key: "k", payload, success: Schema.Number })
        )
      )
  }))

  const retries: ReadonlyArray<readonly [name: string, first: unknown, retry: unknown]> = [
    ["{ amount: NaN } after { amount: null }", { amount: null }, { amount: NaN }],
    ["{ amount: Infinity } after { amount: null }", { amount: null }, { amount: Infinity }],
    ["{ id: 10n } after { id: \"10\" }", { id: "10" }, { id: 10n }],
    ["{ items: Map } after { items: {} }", { items: {} }, { items: new Map([["a", 1]]) }],
    ["{ items: [undefined] } after { items: [null] }", { items: [null] }, { items: [undefined] }]
  ]

  for (const [name, first, retry] of retries) {
    it.effect(`once: ${name}`, () =>
      Effect.gen(function*() {
        const { run, runs } = yield* counted
        assert.isFalse((yield* run(first)).replayed)
        const error = yield* Effect.flip(run(retry))
        assert.strictEqual(error._tag, "InvalidPayload")
        assert.strictEqual(yield* Ref.get(runs), 1)
      }).pipe(Effect.provide(IdempotencyStore.layerMemoryWith({ warn: false }))))
  }

  it.effect("make with a payload schema: { amount: NaN } after { amount: null }", () =>
    Effect.gen(function*() {
      const runs = yield* Ref.make(0)
      const operation = Idempotency.make({
        name: "charge",
        payload: Schema.Struct({ amount: Schema.NullOr(Schema.Number) }),
        success: Schema.Number,
        execute: () => Ref.updateAndGet(runs, (n) => n + 1)
      })
      assert.strictEqual(yield* operation.run({ key: "k", payload: { amount: null } }), 1)
      const error = yield* Effect.flip(operation.runDetailed({ key: "k", payload: { amount: NaN } }))
      assert.instanceOf(error, IdempotencyError.InvalidPayload)
      assert.strictEqual((error as IdempotencyError.InvalidPayload).detail, `["amount"]: expected a finite number`)
      assert.strictEqual(yield* Ref.get(runs), 1)
    }).pipe(Effect.provide(IdempotencyStore.layerMemoryWith({ warn: false }))))
})
