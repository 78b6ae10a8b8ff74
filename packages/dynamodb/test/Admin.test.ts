import { IdempotencyAdmin, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { AdminConformance, StoreFixtures } from "@effect-idempotency/testing"
import { assert, describe, it, layer } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/TestClock"
import { backends, storeLayer } from "./utils/backends.js"
import { connectionReset, injectFailures, recordRequests, startAtWallClock } from "./utils/requests.js"
import { resolve, scriptedStore, succeed } from "./utils/scripted.js"

const { expectReserved, freshId, reserveRequest } = StoreFixtures

for (const backend of backends) {
  AdminConformance.suite(`DynamoDbStore admin on ${backend.name}`, storeLayer(backend))

  layer(Layer.provideMerge(IdempotencyAdmin.layer, storeLayer(backend)), { timeout: Duration.seconds(60) })(
    `DynamoDbStore admin details on ${backend.name}`,
    (it) => {
      /** A record of `operation` reserved with `lease`, completed with `outcome` when given. */
      const record = (
        operation: string,
        options: {
          readonly lease?: Duration.Duration
          readonly ttl?: Duration.Duration
          readonly outcome?: IdempotencyRecord.StoredOutcome | "failed"
        }
      ) =>
        Effect.gen(function*() {
          const store = yield* IdempotencyStore.IdempotencyStore
          const id = freshId({ operation })
          const ttl = options.ttl ?? Duration.hours(1)
          const request = reserveRequest(id, { lease: options.lease ?? Duration.hours(1), ttl })
          expectReserved(yield* store.reserve(request))
          if (options.outcome === "failed") yield* store.markFailed({ id, token: request.token, ttl })
          else if (options.outcome !== undefined) {
            yield* store.complete({ id, token: request.token, outcome: options.outcome, ttl })
          }
          return id
        })

      /** Every page of a listing, one record a page. */
      const listAll = (query: IdempotencyAdmin.ListQuery) =>
        Effect.gen(function*() {
          const admin = yield* IdempotencyAdmin.IdempotencyAdmin
          const keys: Array<string> = []
          let cursor: string | undefined
          do {
            const page = yield* admin.list({ ...query, limit: 1, cursor })
            keys.push(...page.records.map((record) => record.key))
            cursor = page.cursor
          } while (cursor !== undefined)
          return keys.sort()
        })

      it.effect("the scan's filter agrees with stateOf for every state, and leaves out expired records", () =>
        Effect.gen(function*() {
          yield* startAtWallClock
          const operation = `admin-states/${crypto.randomUUID()}`
          const { Failure, Omitted, Success, Timeout } = IdempotencyRecord.StoredOutcome
          const ids = {
            running: [yield* record(operation, {})],
            stuck: [yield* record(operation, { lease: Duration.seconds(1) })],
            completed: [
              yield* record(operation, { outcome: Success({ value: "1" }) }),
              yield* record(operation, { outcome: Failure({ error: "\"no\"" }) })
            ],
            unknown: [yield* record(operation, { outcome: Timeout() })],
            omitted: [yield* record(operation, { outcome: Omitted({ reason: "too large" }) })],
            failed: [yield* record(operation, { outcome: "failed" })]
          }
          // expired, but still in the table (native TTL deletes late)
          yield* record(operation, { lease: Duration.seconds(1), ttl: Duration.seconds(5) })
          yield* TestClock.adjust(Duration.seconds(10))
          const keysOf = (list: ReadonlyArray<IdempotencyRecord.RecordId>) => list.map((id) => id.key as string).sort()
          for (const [state, list] of Object.entries(ids)) {
            assert.deepStrictEqual(
              yield* listAll({ operation, state: state as IdempotencyAdmin.State }),
              keysOf(list),
              state
            )
          }
          assert.deepStrictEqual(yield* listAll({ operation }), keysOf(Object.values(ids).flat()))
          assert.deepStrictEqual(
            yield* listAll({ operation, state: "stuck", olderThan: "5 seconds" }),
            keysOf(ids.stuck)
          )
          assert.deepStrictEqual(yield* listAll({ operation, state: "stuck", olderThan: "15 seconds" }), [])
          const admin = yield* IdempotencyAdmin.IdempotencyAdmin
          const counts = (yield* admin.stats).filter((count) => count.operation === operation)
          assert.deepStrictEqual(
            Object.fromEntries(counts.map((count) => [count.state, count.count])),
            Object.fromEntries(Object.entries(ids).map(([state, list]) => [state, list.length]))
          )
        }))

      it.effect("an expired record is absent to unblock, though still in the table", () =>
        Effect.gen(function*() {
          yield* startAtWallClock
          const admin = yield* IdempotencyAdmin.IdempotencyAdmin
          const id = yield* record(`admin-expired-${crypto.randomUUID()}`, {
            lease: Duration.seconds(1),
            ttl: Duration.seconds(5)
          })
          yield* TestClock.adjust(Duration.seconds(10))
          const error = yield* Effect.flip(
            admin.unblock({ operation: id.operation, key: id.key }, { reason: "r", expect: { attempt: 1 } })
          )
          assert.strictEqual(error._tag, "UnblockRefused")
          assert.strictEqual((error as IdempotencyAdmin.UnblockRefused).reason, "absent")
        }))

      it.scoped("an unblock is one DeleteItem; a refusal reads the record only where the endpoint does not return it", () =>
        Effect.gen(function*() {
          const admin = yield* IdempotencyAdmin.IdempotencyAdmin
          const operation = `admin-requests-${crypto.randomUUID()}`
          const stuck = yield* record(operation, { lease: Duration.zero })
          const running = yield* record(operation, {})
          const requests = yield* recordRequests
          yield* admin.unblock({ operation, key: stuck.key }, { reason: "r", expect: { attempt: 1 } })
          assert.deepStrictEqual(yield* requests.take, ["DeleteItem"])
          const error = yield* Effect.flip(
            admin.unblock({ operation, key: running.key }, { reason: "r", expect: { attempt: 1 } })
          )
          assert.strictEqual((error as IdempotencyAdmin.UnblockRefused).reason, "running")
          assert.deepStrictEqual(
            yield* requests.take,
            backend.returnsItemOnConditionFailure ? ["DeleteItem"] : ["DeleteItem", "GetItem"]
          )
        }))

      it.scoped("an unblock whose response was lost after it was applied reports the record unblocked", () =>
        Effect.gen(function*() {
          const admin = yield* IdempotencyAdmin.IdempotencyAdmin
          const operation = `admin-lost-${crypto.randomUUID()}`
          const stuck = yield* record(operation, { lease: Duration.zero })
          yield* injectFailures({ when: (n) => n === 1, error: connectionReset, afterSending: true })
          yield* admin.unblock({ operation, key: stuck.key }, { reason: "r", expect: { attempt: 1 } })
          assert.deepStrictEqual(yield* listAll({ operation }), [])
        }))
    }
  )
}

const adminOf = (store: IdempotencyStore.IdempotencyStore["Type"]): IdempotencyAdmin.AdminStore => {
  assert.isTrue(IdempotencyAdmin.hasAdmin(store))
  return (store as unknown as { readonly [IdempotencyAdmin.AdminTypeId]: IdempotencyAdmin.AdminStore })[
    IdempotencyAdmin.AdminTypeId
  ]
}

describe("the requests of DynamoDbStore's admin primitives", () => {
  it.effect("list, unblock and stats", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(10_000)
      const { sent, store } = yield* scriptedStore(succeed)
      const admin = adminOf(store)
      yield* admin.list({ state: "stuck", operation: "pay ment", olderThanMillis: 3000, limit: 50, cursor: "a#b" })
      yield* admin.list({
        state: "completed",
        operation: undefined,
        olderThanMillis: undefined,
        limit: 7,
        cursor: undefined
      })
      yield* admin.unblock({ recordId: "op#k", attempt: 3 })
      yield* admin.stats
      assert.deepStrictEqual(
        sent.map((request): Record<string, unknown> => ({
          command: request.command,
          ...Object.fromEntries(
            ["ConditionExpression", "FilterExpression", "ProjectionExpression", "Limit", "ExclusiveStartKey"]
              .filter((field) => request.input[field] !== undefined)
              .map((field) => [field, field.endsWith("Expression") ? resolve(request, field) : request.input[field]])
          )
        })),
        [
          {
            command: "Scan",
            FilterExpression:
              "expires_at > 10000 AND status = 'IN_PROGRESS' AND lease_until <= 10000 AND begins_with(id, 'pay%20ment#') " +
              "AND lease_until <= 7000",
            Limit: 50,
            ExclusiveStartKey: { id: { S: "a#b" } }
          },
          {
            command: "Scan",
            FilterExpression: "expires_at > 10000 AND status = 'COMPLETED' AND " +
              "(attribute_not_exists(outcome_kind) OR outcome_kind <> 'Timeout' AND outcome_kind <> 'Omitted')",
            Limit: 7
          },
          {
            command: "DeleteItem",
            ConditionExpression: "expires_at > 10000 AND attempt = 3 AND " +
              "(status = 'IN_PROGRESS' AND lease_until <= 10000 OR status = 'COMPLETED' AND outcome_kind = 'Timeout' " +
              "OR status = 'FAILED')"
          },
          {
            command: "Scan",
            FilterExpression: "expires_at > 10000",
            ProjectionExpression: "id, status, token, fingerprint, attempt, lease_until, expires_at, outcome_kind"
          }
        ]
      )
      assert.isTrue(sent.every((request) => request.command === "DeleteItem" || request.input.ConsistentRead === true))
    }))

  it.effect("every listing defines exactly the placeholders its filter uses", () =>
    Effect.gen(function*() {
      const { sent, store } = yield* scriptedStore(succeed)
      const admin = adminOf(store)
      const states = [undefined, "running", "stuck", "completed", "unknown", "omitted", "failed"] as const
      for (const state of states) {
        for (const operation of [undefined, "op"]) {
          for (const olderThanMillis of [undefined, 1000]) {
            yield* admin.list({ state, operation, olderThanMillis, limit: 10, cursor: undefined })
          }
        }
      }
      assert.strictEqual(sent.length, 28)
      for (const request of sent) {
        const text = String(request.input.FilterExpression)
        const used = new Set(text.match(/[#:]\w+/g) ?? [])
        const defined = [
          ...Object.keys((request.input.ExpressionAttributeNames ?? {}) as object),
          ...Object.keys((request.input.ExpressionAttributeValues ?? {}) as object)
        ]
        assert.deepStrictEqual(defined.sort(), [...used].sort(), text)
      }
    }))
})
