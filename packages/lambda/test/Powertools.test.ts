/**
 * Side by side with AWS Lambda Powertools' idempotency utility (`makeIdempotent` with its DynamoDB
 * persistence layer), on DynamoDB Local: the same events and the same faults through both, played
 * by the Lambda-like runner, counting the downstream's writes and checking that a later replay gives
 * what the client of the successful invocation got. The table in the package README is this test's
 * output (`npx vitest run --project lambda test/Powertools.test.ts` prints it).
 *
 * The faults:
 * - a timeout after the write: the downstream writes at once and answers after the function's
 *   timeout; Lambda retries the asynchronous invocation;
 * - a crash after the write: the handler fails with an exception right after the downstream wrote;
 * - a concurrent duplicate: the same event twice at the same time;
 * - a stale owner that completes late: an invocation whose downstream call cannot be stopped runs
 *   past its in-progress expiry; another invocation of the same event comes in meanwhile.
 */
import { IdempotencyConfig, makeIdempotent } from "@aws-lambda-powertools/idempotency"
import { DynamoDBPersistenceLayer } from "@aws-lambda-powertools/idempotency/dynamodb"
import { DynamoDBClient } from "@aws-sdk/client-dynamodb"
import type { IdempotencyPolicy } from "@effect-idempotency/core"
import { DynamoDbClient, DynamoDbTable } from "@effect-idempotency/dynamodb"
import { LambdaEvent } from "@effect-idempotency/lambda"
import { assert, describe, it } from "@effect/vitest"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { randomUUID } from "node:crypto"
import { inject } from "vitest"
import type { Invocation, LambdaHandler } from "./utils/LambdaRunner.js"
import { invoke, invokeAsync, makeDownstream } from "./utils/LambdaRunner.js"
import { realStores } from "./utils/stores.js"

const backend = inject("dynamodbBackends").find((b) => b.name === "DynamoDB Local") ?? inject("dynamodbBackends")[0]!
const dynamoStore = realStores.find((store) => store.name.startsWith("DynamoDB"))!

const TIMEOUT = "1500 millis"
const RETRIES = { timeout: TIMEOUT, retryDelays: ["2 seconds", "2 seconds"] } as const

interface OrderEvent {
  readonly orderId: string
}
const OrderEvent = Schema.Struct({ orderId: Schema.String })
const Created = Schema.Struct({ orderId: Schema.String, write: Schema.Number })
type Created = typeof Created.Type

type Fault = "timeoutAfterWrite" | "crashAfterWrite" | "concurrentDuplicate" | "staleOwner"

/** What one contender did under one fault. */
interface Row {
  readonly writes: number
  /** A replay after the fact gives what the successful client got. */
  readonly consistent: boolean
}

/** The downstream of a scenario: each call is a write; `plan` says how the n-th call behaves. */
const scenario = (fault: Fault) => {
  const downstream = makeDownstream({ deduplicate: false })
  let calls = 0
  /** The n-th call's delay before answering, and whether it throws after writing. */
  const plan = (): { readonly answerAfter: Duration.DurationInput; readonly crash: boolean } => {
    const n = ++calls
    switch (fault) {
      case "timeoutAfterWrite":
        return { answerAfter: n === 1 ? "4 seconds" : 0, crash: false }
      case "crashAfterWrite":
        return { answerAfter: 0, crash: n === 1 }
      case "concurrentDuplicate":
        return { answerAfter: "300 millis", crash: false }
      case "staleOwner":
        return { answerAfter: n === 1 ? "2500 millis" : 0, crash: false }
    }
  }
  return { downstream, plan }
}

/** Plays a fault against a handler; a replay afterwards shows what the record holds. */
const play = (fault: Fault, handler: LambdaHandler<OrderEvent, Created>) =>
  Effect.gen(function*() {
    const event = { orderId: `order-${randomUUID()}` }
    const results: Array<Invocation<Created>> = []
    switch (fault) {
      case "timeoutAfterWrite":
      case "crashAfterWrite":
        results.push(...(yield* invokeAsync(handler, event, RETRIES)))
        break
      case "concurrentDuplicate":
        results.push(
          ...(yield* Effect.all([invoke(handler, event, TIMEOUT), invoke(handler, event, TIMEOUT)], {
            concurrency: "unbounded"
          }))
        )
        break
      case "staleOwner": {
        // its context says 1 s is left; the runner lets it run 5 s (it is not stopped at its expiry)
        const stale = yield* Effect.fork(invoke(handler, event, "5 seconds", { claimedTimeout: "1 second" }))
        yield* Effect.sleep("1200 millis")
        results.push(...(yield* invokeAsync(handler, event, RETRIES)))
        results.push(yield* Fiber.join(stale))
        break
      }
    }
    // let late completions land (the last comes 4 s after the first call), then replay
    yield* Effect.sleep("1500 millis")
    const replay = yield* invoke(handler, event, TIMEOUT)
    return { results, replay }
  })

const consistentWith = (results: ReadonlyArray<Invocation<Created>>, replay: Invocation<Created>): boolean => {
  const got = results.filter((r) => r._tag === "Ok").map((r) => (r as { value: Created }).value)
  if (replay._tag !== "Ok") return got.length === 0
  return got.every((value) => value.write === replay.value.write)
}

interface Contender {
  readonly downstream: ReturnType<typeof makeDownstream>
  readonly handler: LambdaHandler<OrderEvent, Created>
}

const powertools = (fault: Fault): Effect.Effect<Contender, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const tableName = `powertools-${randomUUID()}`
    const client = yield* Effect.acquireRelease(
      Effect.sync(() =>
        new DynamoDBClient({
          endpoint: backend.endpoint,
          region: "us-east-1",
          credentials: { accessKeyId: "local", secretAccessKey: "local" }
        })
      ),
      (client) => Effect.sync(() => client.destroy())
    )
    yield* DynamoDbTable.create({ tableName }).pipe(
      Effect.provideService(DynamoDbClient.DynamoDbClient, DynamoDbClient.DynamoDbClient.of({ client }))
    )
    const { downstream, plan } = scenario(fault)
    const handler = makeIdempotent(
      async (event: OrderEvent, _context: unknown): Promise<Created> => {
        const { answerAfter, crash } = plan()
        const receipt = await Effect.runPromise(downstream.write(event.orderId, undefined, answerAfter))
        if (crash) throw new Error("the response parser failed")
        return { orderId: receipt.request, write: receipt.number }
      },
      {
        persistenceStore: new DynamoDBPersistenceLayer({ tableName, awsSdkV3Client: client }),
        config: new IdempotencyConfig({ eventKeyJmesPath: "orderId" })
      }
    ) as LambdaHandler<OrderEvent, Created>
    return { downstream, handler }
  })

const ours = (fault: Fault, onTimeout: IdempotencyPolicy.TimeoutPolicy): Effect.Effect<Contender, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { downstream, plan } = scenario(fault)
    const handler = yield* Effect.acquireRelease(
      Effect.sync(() =>
        LambdaEvent.idempotent({
          name: "create-order",
          layer: dynamoStore.layer(),
          event: OrderEvent,
          key: (event) => event.orderId,
          success: Created,
          onTimeout,
          handler: (event) =>
            Effect.gen(function*() {
              const { answerAfter, crash } = plan()
              // a downstream call that cannot be stopped once sent, as the Powertools one
              const receipt = yield* Effect.uninterruptible(downstream.write(event.orderId, undefined, answerAfter))
              if (crash) return yield* Effect.die(new Error("the response parser failed"))
              return { orderId: receipt.request, write: receipt.number }
            })
        })
      ),
      (handler) => Effect.promise(() => handler.dispose())
    )
    return { downstream, handler }
  })

const row = (fault: Fault, contender: Effect.Effect<Contender, unknown, Scope.Scope>) =>
  Effect.gen(function*() {
    const { downstream, handler } = yield* contender
    const { replay, results } = yield* play(fault, handler)
    return { writes: downstream.total(), consistent: consistentWith(results, replay) } satisfies Row
  })

const FAULTS: ReadonlyArray<readonly [Fault, string]> = [
  ["timeoutAfterWrite", "a timeout after the write, retried"],
  ["crashAfterWrite", "a crash after the write, retried"],
  ["concurrentDuplicate", "a concurrent duplicate"],
  ["staleOwner", "a stale owner that completes late"]
]

describe("side by side with Powertools' makeIdempotent, on DynamoDB Local", () => {
  it.scopedLive(
    "the same events and faults: downstream writes, and whether a replay gives what the client got",
    () =>
      Effect.gen(function*() {
        const table: Array<string> = [
          "| fault | Powertools (default) | ours, `keepLease` (default) | ours, `markUnknown` |",
          "| --- | --- | --- | --- |"
        ]
        const cell = (r: Row) =>
          `${r.writes} write${r.writes === 1 ? "" : "s"}${r.consistent ? "" : ", replay differs"}`
        const results: Record<string, ReadonlyArray<Row>> = {}
        for (const [fault, title] of FAULTS) {
          const rows = [
            yield* row(fault, powertools(fault)),
            yield* row(fault, ours(fault, "keepLease")),
            yield* row(fault, ours(fault, "markUnknown"))
          ]
          results[fault] = rows
          table.push(`| ${title} | ${rows.map(cell).join(" | ")} |`)
        }
        console.log(table.join("\n"))
        const [pt, keep, unknown] = [0, 1, 2]
        // a concurrent duplicate: everyone holds
        for (const r of results.concurrentDuplicate!) assert.strictEqual(r.writes, 1)
        // a stale owner: Powertools lets the retry run beside it (two writes) and the stale owner's late
        // save overwrite the record; ours keeps the lease while the call winds down, so the retry waits
        // for it. Its value is lost when it ends (an interrupted uninterruptible region, as in any Effect
        // program): `keepLease` lets a retry take over after the lease (a second write, once the first
        // ended, and fenced out of the new owner's record); `markUnknown` never writes again
        assert.isAtLeast(results.staleOwner![pt]!.writes, 2)
        assert.isAtMost(results.staleOwner![keep]!.writes, 2)
        assert.strictEqual(results.staleOwner![unknown]!.writes, 1)
        assert.strictEqual(results.timeoutAfterWrite![unknown]!.writes, 1)
        // and the replay gives what the client got: under Powertools, the stale owner's late save
        // replaced the record of the invocation that answered its client
        for (const [fault] of FAULTS) {
          assert.isTrue(results[fault]![keep]!.consistent, fault)
          assert.isTrue(results[fault]![unknown]!.consistent, fault)
        }
        assert.isFalse(results.staleOwner![pt]!.consistent)
        // at-most-once, chosen: a timeout or a crash after the write never writes twice
        assert.strictEqual(results.timeoutAfterWrite![unknown]!.writes, 1)
        assert.strictEqual(results.crashAfterWrite![unknown]!.writes, 1)
        // without a deduplicating downstream, a retry after a crash writes again under Powertools (it
        // deletes the record on an exception) and under keepLease (the lease ends): both at least once
        assert.isAtLeast(results.crashAfterWrite![pt]!.writes, 2)
        assert.isAtLeast(results.crashAfterWrite![keep]!.writes, 2)
      }),
    300_000
  )
})
