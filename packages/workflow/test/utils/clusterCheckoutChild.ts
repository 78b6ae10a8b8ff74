/**
 * A process that runs the Checkout workflow on `@effect/cluster`'s `ClusterWorkflowEngine`, its
 * messages, replies and shard locks in PostgreSQL (`ClusterKilledProcess.test.ts`), next to the
 * idempotency records (`PgIdempotencyStore`) and the bank's `charges` and `receipts`.
 *
 * Arguments: the database URL and its kind (`server` or `pglite`), the order id, the activity
 * (`idempotent`: `IdempotentActivity.make`; `plain`: `Activity.make`, the control), and the mode:
 *
 * - `after-charge`: executes the workflow; the activity charges and returns, and the engine's
 *   `saveReply` of the activity's result never reaches the database: the process prints
 *   `PAUSED after-charge` there and waits to be killed;
 * - `inside-charge`: executes the workflow; the activity starts and pauses before it charges;
 * - `execute`: executes the workflow, writes its receipt and prints `DONE`;
 * - `resume`: starts the runner and registers the workflow without executing it, then polls the
 *   engine until the execution is complete, writes its receipt and prints `DONE`.
 */
import { IdempotencyContext } from "@effect-idempotency/core"
import { PgIdempotencyStore } from "@effect-idempotency/sql-pg"
import * as Children from "@effect-idempotency/test-support/Children"
import { IdempotentActivity } from "@effect-idempotency/workflow"
import * as ClusterWorkflowEngine from "@effect/cluster/ClusterWorkflowEngine"
import * as Message from "@effect/cluster/Message"
import * as MessageStorage from "@effect/cluster/MessageStorage"
import * as RunnerHealth from "@effect/cluster/RunnerHealth"
import * as Runners from "@effect/cluster/Runners"
import * as RunnerStorage from "@effect/cluster/RunnerStorage"
import * as Sharding from "@effect/cluster/Sharding"
import * as ShardingConfig from "@effect/cluster/ShardingConfig"
import * as SingleRunner from "@effect/cluster/SingleRunner"
import * as SqlMessageStorage from "@effect/cluster/SqlMessageStorage"
import * as SqlRunnerStorage from "@effect/cluster/SqlRunnerStorage"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Activity from "@effect/workflow/Activity"
import * as Workflow from "@effect/workflow/Workflow"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"

const [url, server, orderId, kind, mode] = process.argv.slice(2) as [
  string,
  "server" | "pglite",
  string,
  "idempotent" | "plain",
  "after-charge" | "inside-charge" | "execute" | "resume"
]

// PGlite is one session behind its socket server: two connections' statements would interleave
// there, so a process holds one connection, and the shard locks (a reserved connection) stay in memory
const single = server === "pglite"
const runnerStorage = single ? "memory" : "sql"

const Receipt = Schema.Struct({ chargeId: Schema.String })

const Checkout = Workflow.make({
  name: "Checkout",
  payload: { orderId: Schema.String, amountCents: Schema.Int },
  success: Receipt,
  error: IdempotentActivity.IdempotencyErrors,
  idempotencyKey: ({ orderId }) => orderId
})

const payload = { orderId, amountCents: 1999 }

const CheckoutLive = Checkout.toLayer(({ amountCents, orderId }) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const charge = (key: string) =>
      Effect.gen(function*() {
        if (mode === "inside-charge") yield* Effect.promise(() => Children.pause("inside-charge"))
        const chargeId = `ch_${randomUUID()}`
        yield* sql`INSERT INTO charges (charge_id, order_id, amount_cents, idempotency_key) VALUES (${chargeId}, ${orderId}, ${amountCents}, ${key})`
        return { chargeId }
      }).pipe(Effect.orDie)
    if (kind === "plain") {
      return yield* Activity.make({
        name: "charge",
        success: Receipt,
        execute: Effect.flatMap(Activity.idempotencyKey("charge"), charge)
      })
    }
    return yield* IdempotentActivity.make({
      name: "charge",
      success: Receipt,
      payload,
      // a lease that outlasts the restart: the redelivered activity finds the key held and waits
      timeout: "1 second",
      lease: "8 seconds",
      execute: Effect.flatMap(IdempotencyContext.IdempotencyContext, ({ key }) => charge(key))
    })
  })
)

const shardingConfig = { entityMessagePollInterval: "1 second", shardsPerGroup: 16 } as const

/** The request with a `respond` that pauses where the engine would save the activity's result. */
const pauseBeforeActivityReply = (message: Message.Incoming<any>): Message.Incoming<any> =>
  message._tag === "IncomingRequest" && message.envelope.tag === "activity"
    ? new Message.IncomingRequest({ ...message, respond: () => Effect.promise(() => Children.pause("after-charge")) })
    : message

/**
 * `SingleRunner.layer({ runnerStorage: "sql" })` as it is built there, but its `MessageStorage`
 * hands the entities an activity request whose result is never saved: the process pauses there.
 */
const PausingRunner = Sharding.layer.pipe(
  Layer.provideMerge(Runners.layerNoop),
  Layer.provideMerge(
    Layer.effect(
      MessageStorage.MessageStorage,
      Effect.map(MessageStorage.MessageStorage, (storage) =>
        MessageStorage.MessageStorage.of({
          ...storage,
          unprocessedMessages: (shardIds) =>
            Effect.map(storage.unprocessedMessages(shardIds), (messages) => messages.map(pauseBeforeActivityReply)),
          unprocessedMessagesById: (ids) =>
            Effect.map(storage.unprocessedMessagesById(ids), (messages) => messages.map(pauseBeforeActivityReply))
        }))
    ).pipe(Layer.provide(SqlMessageStorage.layer))
  ),
  Layer.provide([single ? RunnerStorage.layerMemory : Layer.orDie(SqlRunnerStorage.layer), RunnerHealth.layerNoop]),
  Layer.provide(ShardingConfig.layer(shardingConfig))
)

const Runner = mode === "after-charge" ? PausingRunner : SingleRunner.layer({ runnerStorage, shardingConfig })

/** The execution's receipt, once the engine has it: polled every 100 ms for at most 50 s. */
const awaitReceipt = Effect.gen(function*() {
  const executionId = yield* Checkout.executionId(payload)
  for (let i = 0; i < 500; i++) {
    const result = yield* Checkout.poll(executionId)
    if (result?._tag === "Complete") return yield* result.exit
    yield* Effect.sleep("100 millis")
  }
  return yield* Effect.dieMessage("the engine did not complete the workflow in 50 s")
})

const program = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const receipt = mode === "resume" ? yield* awaitReceipt : yield* Checkout.execute(payload)
  yield* sql`INSERT INTO receipts (order_id, charge_id) VALUES (${orderId}, ${receipt.chargeId})`
}).pipe(
  Effect.provide(
    CheckoutLive.pipe(
      Layer.provideMerge(ClusterWorkflowEngine.layer),
      Layer.provideMerge(Runner),
      Layer.provideMerge(PgIdempotencyStore.layerWith({ migrate: true })),
      Layer.provideMerge(PgClient.layer({ url: Redacted.make(url), maxConnections: single ? 1 : 8 }))
    )
  ),
  Effect.orDie
)

Children.runMain(program)
