import { Idempotency, IdempotencyKey, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { assert, layer } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import { backends, storeLayer } from "./utils/backends.js"
import { recordRequests, startAtWallClock } from "./utils/requests.js"

/** An operation whose downstream returns `size` characters and counts its executions. */
const largeOperation = (size: number) =>
  Effect.map(Ref.make(0), (executions) => ({
    executions,
    op: Idempotency.make({
      name: `item-limit-${randomUUID()}`,
      payload: Schema.Struct({ report: Schema.String }),
      success: Schema.String,
      execute: () => Effect.as(Ref.update(executions, (n) => n + 1), "r".repeat(size))
    })
  }))

const recordOf = (operation: string, key: string) =>
  Effect.flatMap(
    IdempotencyStore.IdempotencyStore,
    (store) => store.get(IdempotencyRecord.makeRecordId({ operation, key: IdempotencyKey.unsafeMake(key) }))
  )

/** Runs a too-large outcome twice: one execution, then a typed error; the record is COMPLETED, outcome omitted. */
const tooLarge = (size: number, expectedRequests: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    yield* startAtWallClock
    const requests = yield* recordRequests
    const { executions, op } = yield* largeOperation(size)
    const key = randomUUID()
    const first = yield* op.runDetailed({ key, payload: { report: "q3" } })
    assert.strictEqual(first.value.length, size)
    assert.isFalse(first.replayed)
    assert.isTrue(first.recorded)
    assert.deepStrictEqual(yield* requests.take, expectedRequests)
    const record = Option.getOrThrow(yield* recordOf(op.name, key))
    assert.strictEqual(record.status, "COMPLETED")
    const outcome = record.outcome
    if (outcome?._tag !== "Omitted") return assert.fail(`expected an omitted outcome, got ${outcome?._tag}`)
    assert.include(outcome.reason, "item size limit")
    for (let retry = 0; retry < 3; retry++) {
      const replay = yield* Effect.flip(op.run({ key, payload: { report: "q3" } }))
      assert.strictEqual(replay._tag, "OutcomeNotReplayable")
    }
    assert.strictEqual(yield* Ref.get(executions), 1)
  })

for (const backend of backends) {
  layer(storeLayer(backend), { timeout: Duration.seconds(60) })(`the 400 KB item limit on ${backend.name}`, (it) => {
    it.scoped("an outcome over the limit is recorded as omitted before writing: one execution, replays fail typed", () =>
      tooLarge(500 * 1024, ["PutItem", "UpdateItem"]))

    it.scoped("an outcome just under the limit is stored and replayed exactly", () =>
      Effect.gen(function*() {
        yield* startAtWallClock
        const { executions, op } = yield* largeOperation(390 * 1024)
        const key = randomUUID()
        const first = yield* op.run({ key, payload: { report: "q3" } })
        const replay = yield* op.runDetailed({ key, payload: { report: "q3" } })
        assert.isTrue(replay.replayed)
        assert.strictEqual(replay.value, first)
        assert.strictEqual(yield* Ref.get(executions), 1)
      }))
  })

  // an estimate that lets everything through: DynamoDB itself refuses the item
  layer(storeLayer(backend, { maxItemBytes: 16 * 1024 * 1024 }), { timeout: Duration.seconds(60) })(
    `an outcome DynamoDB refuses as too large on ${backend.name}`,
    (it) => {
      it.scoped("is recorded as omitted after the refusal: one execution, replays fail typed", () =>
        tooLarge(500 * 1024, ["PutItem", "UpdateItem", "UpdateItem"]))
    }
  )
}
