import { Fingerprint } from "@effect-idempotency/core"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
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
