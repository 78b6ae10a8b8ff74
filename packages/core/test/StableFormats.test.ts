/**
 * Formats that must never change between versions, pinned to literal values. A record id, a
 * fingerprint or a derived step key that changed after a deploy would make every retry of a request
 * made before it fail with `KeyReused`, or (a step key) send the downstream a new key: a second
 * charge. Each expected value was computed outside this code, from the canonical text written next
 * to it (`printf '<text>' | sha256sum`; step keys: `printf '<record id>\0<step>' | openssl dgst
 * -sha256 -binary | base64 | tr '+/' '-_' | tr -d '='`).
 */
import { Fingerprint, IdempotencyContext, IdempotencyKey, IdempotencyRecord } from "@effect-idempotency/core"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

const charge = IdempotencyRecord.makeRecordId({ operation: "charge", key: IdempotencyKey.unsafeMake("k-1") })
const scoped = IdempotencyRecord.makeRecordId({
  operation: "charge customer",
  scope: "tenant/1#a",
  key: IdempotencyKey.unsafeMake("5f1c7e2a-9d1b")
})

describe("stable formats", () => {
  it("record ids: operation#key, or operation#scope#key, operation and scope percent-encoded", () => {
    assert.strictEqual(charge.value, "charge#k-1")
    assert.strictEqual(scoped.value, "charge%20customer#tenant%2F1%23a#5f1c7e2a-9d1b")
  })

  it("record ids: each operation keeps its own encoding when ids of several operations alternate", () => {
    const key = IdempotencyKey.unsafeMake("k")
    const idOf = (operation: string) => IdempotencyRecord.makeRecordId({ operation, key }).value
    for (let round = 0; round < 3; round++) {
      assert.strictEqual(idOf("a b"), "a%20b#k")
      assert.strictEqual(idOf("charge"), "charge#k")
      // a name that cannot be percent-encoded (a lone surrogate) throws, and changes nothing after it
      assert.throws(() => idOf("bad\ud800"), URIError)
      assert.throws(() => idOf("bad\ud800"), URIError)
      assert.strictEqual(idOf("charge"), "charge#k")
      assert.strictEqual(idOf("a b"), "a%20b#k")
    }
  })

  it.effect("fingerprints: sha256 of the canonical JSON of the encoded payload", () =>
    Effect.gen(function*() {
      const Payload = Schema.Struct({
        customerId: Schema.String,
        amountCents: Schema.Int,
        at: Schema.DateFromString,
        note: Schema.optional(Schema.String)
      })
      // {"amountCents":1999,"at":"1970-01-01T00:00:00.000Z","customerId":"cus_42","note":"é€😀"}
      assert.strictEqual(
        yield* Fingerprint.make(Payload)({ customerId: "cus_42", amountCents: 1999, at: new Date(0), note: "é€😀" }),
        "sha256:b2ad5f1e4fbc7f941d9ce3675c0f5d667789b583af098e1e80c1b8f05fedff88"
      )
      // {"a":"x","b":[1,2,{"a":true,"z":null}]}
      assert.strictEqual(
        Fingerprint.fromEncoded({ b: [1, 2, { z: null, a: true }], a: "x" }),
        "sha256:dcfe2a3d2102de1d1e5f2a65d1feaf2f69b60bea4c08409297eb9df544f8bb5b"
      )
      // null
      assert.strictEqual(
        Fingerprint.fromEncoded(null),
        "sha256:74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b"
      )
      // ""
      assert.strictEqual(
        Fingerprint.fromEncoded(""),
        "sha256:12ae32cb1ec02d01eda3581b127c1fee3b0dc53572ed6baf239721a03d82e126"
      )
    }))

  it("step keys: base64url of sha256 over the record id, a NUL and the step", () => {
    // charge#k-1 \0 payments
    assert.strictEqual(
      IdempotencyContext.deriveStepKey(charge, "payments"),
      "ogzWtkqK5EfKRcRfsfaF86t6tGL939GwpobHR2Nt_hI"
    )
    // charge%20customer#tenant%2F1%23a#5f1c7e2a-9d1b \0 carrier
    assert.strictEqual(
      IdempotencyContext.deriveStepKey(scoped, "carrier"),
      "MW0XS5Naj6c5bJrpNHdDR6K7Q5ZzHM8jzYCvD8XDb0A"
    )
    assert.strictEqual(IdempotencyContext.deriveStepKey(scoped, ""), "CPa6khVamdWpC485bbmBK0OiB5ZD3v-Oxa7ng6ilDuo")
  })
})
