import { IdempotencyKey, IdempotencyRecord } from "@effect-idempotency/core"
import type { IdempotencyStore } from "@effect-idempotency/core"
import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import type { Sent } from "./utils/scripted.js"
import { callEveryMethod, conditionFailed, item, resolve, scriptedStore, succeed } from "./utils/scripted.js"

const id = IdempotencyRecord.makeRecordId({ operation: "requests", key: IdempotencyKey.unsafeMake("key-1") })
const token = "token-1"

const reserveRequest = (overrides?: Partial<IdempotencyStore.ReserveRequest>): IdempotencyStore.ReserveRequest => ({
  id,
  token,
  fingerprint: "sha256:requests",
  lease: Duration.seconds(30),
  ttl: Duration.hours(1),
  takeover: true,
  ...overrides
})

const expressionFields = ["ConditionExpression", "UpdateExpression", "FilterExpression", "ProjectionExpression"]

/** DynamoDB rejects a request with a placeholder its expressions do not use, or use without defining. */
const assertPlaceholdersExact = (sent: Sent) => {
  const text = expressionFields.map((field) => sent.input[field] ?? "").join(" ")
  const used = new Set(text.match(/[#:]\w+/g) ?? [])
  const defined = [
    ...Object.keys((sent.input.ExpressionAttributeNames ?? {}) as object),
    ...Object.keys((sent.input.ExpressionAttributeValues ?? {}) as object)
  ]
  assert.deepStrictEqual([...defined].sort(), [...used].sort(), `${sent.command}: ${text}`)
}

/** Calls every store method once on the scripted client, at the clock time 1000. */
const everyMethod = (options?: { readonly keyAttribute?: string; readonly ttlAttribute?: string }) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(1000)
    const expiredItem = item(id, {
      status: "FAILED",
      token: "old",
      fingerprint: "sha256:requests",
      attempt: 3,
      leaseUntil: 500,
      expiresAt: 900
    })
    // live records the reservations may take over: an ended lease, a FAILED record
    const lapsedItem = { ...expiredItem, status: { S: "IN_PROGRESS" }, expires_at: { N: "9000" } }
    const failedItem = { ...expiredItem, expires_at: { N: "9000" } }
    const { sent, store } = yield* scriptedStore((request, n) => {
      // each reservation's put meets a record it may take over (so the store sends the claim)
      if (n === 1) return Promise.reject(conditionFailed(lapsedItem))
      if (n === 3) return Promise.reject(conditionFailed(failedItem))
      // extend's first write returns the old item: the lease outlives the record
      if (request.command === "UpdateItem" && request.input.ReturnValues === "ALL_OLD") {
        return Promise.resolve({
          Attributes: { ...expiredItem, status: { S: "IN_PROGRESS" }, expires_at: { N: "2000" } }
        })
      }
      if (request.command === "Scan") {
        return Promise.resolve({ Items: [{ [options?.keyAttribute ?? "id"]: { S: "expired-1" } }] })
      }
      return succeed(request)
    }, options)
    yield* callEveryMethod(store, reserveRequest(), reserveRequest({ takeover: false }))
    return sent
  })

describe("the requests DynamoDbStore sends", () => {
  it.effect("each request's expressions, with only the parentheses precedence needs", () =>
    Effect.gen(function*() {
      const sent = yield* everyMethod()
      const lease = 1000 + 30_000
      const expires = 1000 + 3_600_000
      const ttl = Math.ceil(expires / 1000)
      const summary = sent.map((request) => ({
        command: request.command,
        ...Object.fromEntries(
          expressionFields.filter((field) => request.input[field] !== undefined).map((field) => [
            field,
            resolve(request, field)
          ])
        )
      }))
      const claimUpdate = `SET status = 'IN_PROGRESS', token = 'token-1', fingerprint = 'sha256:requests', ` +
        `lease_until = ${lease}, expires_at = ${expires}, ttl = ${ttl}, attempt = if_not_exists(attempt, 0) + 1 ` +
        `REMOVE outcome_kind, outcome_body`
      const owned = "status = 'IN_PROGRESS' AND token = 'token-1' AND expires_at > 1000"
      const put = { command: "PutItem", ConditionExpression: "attribute_not_exists(id) OR expires_at <= 1000" }
      assert.deepStrictEqual(summary, [
        put,
        {
          command: "UpdateItem",
          ConditionExpression:
            "attribute_not_exists(id) OR expires_at > 1000 AND fingerprint = 'sha256:requests' AND " +
            "(status = 'FAILED' OR status = 'IN_PROGRESS' AND lease_until <= 1000)",
          UpdateExpression: claimUpdate
        },
        put,
        {
          command: "UpdateItem",
          ConditionExpression:
            "attribute_not_exists(id) OR expires_at > 1000 AND fingerprint = 'sha256:requests' AND status = 'FAILED'",
          UpdateExpression: claimUpdate
        },
        {
          command: "UpdateItem",
          ConditionExpression: owned,
          UpdateExpression:
            `SET status = 'COMPLETED', outcome_kind = 'Success', outcome_body = '{"ok":true}', expires_at = ${expires}, ` +
            `ttl = ${ttl}`
        },
        {
          command: "UpdateItem",
          ConditionExpression: owned,
          UpdateExpression: `SET status = 'FAILED', expires_at = ${expires}, ttl = ${ttl}`
        },
        {
          command: "UpdateItem",
          ConditionExpression: owned,
          UpdateExpression: `SET lease_until = ${1000 + 7_200_000}`
        },
        {
          command: "UpdateItem",
          ConditionExpression: `${owned} AND expires_at < ${1000 + 7_200_000}`,
          UpdateExpression: `SET expires_at = ${1000 + 7_200_000}, ttl = ${Math.ceil((1000 + 7_200_000) / 1000)}`
        },
        { command: "DeleteItem", ConditionExpression: owned },
        { command: "GetItem" },
        { command: "Scan", FilterExpression: "expires_at <= 1000", ProjectionExpression: "id, expires_at" },
        { command: "DeleteItem", ConditionExpression: "expires_at <= 1000" }
      ])
    }))

  it.effect("every request defines exactly the placeholders its expressions use", () =>
    Effect.gen(function*() {
      for (const options of [undefined, { keyAttribute: "pk", ttlAttribute: "expires_at_s" }]) {
        const sent = yield* everyMethod(options)
        assert.strictEqual(sent.length, 12)
        sent.forEach(assertPlaceholdersExact)
        if (options !== undefined) {
          assert.include(resolve(sent[0]!, "ConditionExpression"), "attribute_not_exists(pk)")
          assert.include(resolve(sent[1]!, "UpdateExpression"), "expires_at_s = ")
          assert.deepStrictEqual(Object.keys(sent[6]!.input.Key as object), ["pk"])
        }
      }
    }))

  it.effect("the expression text and the names are built once per store; a request only brings its values", () =>
    Effect.gen(function*() {
      const { sent, store } = yield* scriptedStore(succeed)
      yield* TestClock.setTime(1000)
      yield* store.reserve(reserveRequest())
      yield* TestClock.setTime(5000)
      yield* store.reserve(reserveRequest({ token: "token-2", fingerprint: "sha256:other" }))
      const [first, second] = sent
      assert.strictEqual(first!.input.ConditionExpression, second!.input.ConditionExpression)
      assert.strictEqual(first!.input.ExpressionAttributeNames, second!.input.ExpressionAttributeNames)
      const values = (request: Sent) => request.input.ExpressionAttributeValues as Record<string, unknown>
      assert.deepStrictEqual(values(first!)[":now"], { N: "1000" })
      assert.deepStrictEqual(values(second!)[":now"], { N: "5000" })
      assert.deepStrictEqual((second!.input.Item as Record<string, unknown>).token, { S: "token-2" })
      // a fresh map per request: a request never sees another one's values
      assert.notStrictEqual(values(first!), values(second!))
    }))

  it.effect("values equal to one another keep their own placeholders", () =>
    Effect.gen(function*() {
      // the put meets an ended lease, so the claim follows
      const lapsed = item(id, {
        status: "IN_PROGRESS",
        token: "old",
        fingerprint: "sha256:requests",
        leaseUntil: 500,
        expiresAt: 9000
      })
      const { sent, store } = yield* scriptedStore((request, n) =>
        n === 1 ? Promise.reject(conditionFailed(lapsed)) : succeed(request)
      )
      yield* TestClock.setTime(1000)
      // lease and ttl of the same length: lease_until = expires_at
      yield* store.reserve(reserveRequest({ lease: Duration.hours(1), ttl: Duration.hours(1) }))
      assert.strictEqual(sent[1]!.command, "UpdateItem")
      assertPlaceholdersExact(sent[1]!)
      assert.include(String(sent[1]!.input.UpdateExpression), "= :leaseUntil")
      assert.include(String(sent[1]!.input.UpdateExpression), "= :expiresAt")
    }))
})
