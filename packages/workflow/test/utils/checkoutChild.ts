/**
 * A process that runs the Checkout workflow on a SQLite file (`KilledProcess.test.ts`): the
 * idempotency records, the bank's `charges` and the `receipts` the workflow answered live in that
 * file; the workflow engine is in memory, so a killed process loses every result it held.
 *
 * Arguments: the file, the order id, and where to stop: `after-charge` (the activity has answered,
 * the workflow has not: the process prints `PAUSED after-charge` and waits to be killed),
 * `inside-charge` (the activity has started and not charged yet), or `finish` (runs to the end, writes
 * its receipt, prints `DONE`).
 */
import { IdempotencyContext } from "@effect-idempotency/core"
import { SqlIdempotencyStore } from "@effect-idempotency/sql"
import * as Children from "@effect-idempotency/test-support/Children"
import { IdempotentActivity } from "@effect-idempotency/workflow"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Workflow from "@effect/workflow/Workflow"
import * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"

const [filename, orderId, stop] = process.argv.slice(2) as [string, string, string]

const Receipt = Schema.Struct({ chargeId: Schema.String })

const Checkout = Workflow.make({
  name: "Checkout",
  payload: { orderId: Schema.String, amountCents: Schema.Int },
  success: Receipt,
  error: IdempotentActivity.IdempotencyErrors,
  idempotencyKey: ({ orderId }) => orderId
})

const CheckoutLive = Checkout.toLayer(({ amountCents, orderId }) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const receipt = yield* IdempotentActivity.make({
      name: "charge",
      success: Receipt,
      payload: { orderId, amountCents },
      // a short lease: the run of a killed process is taken over soon
      timeout: "1 second",
      execute: Effect.gen(function*() {
        if (stop === "inside-charge") yield* Effect.promise(() => Children.pause("inside-charge"))
        const { key } = yield* IdempotencyContext.IdempotencyContext
        const chargeId = `ch_${randomUUID()}`
        yield* sql`INSERT INTO charges (charge_id, order_id, amount_cents, idempotency_key) VALUES (${chargeId}, ${orderId}, ${amountCents}, ${key})`
        return { chargeId }
      }).pipe(Effect.orDie)
    })
    if (stop === "after-charge") yield* Effect.promise(() => Children.pause("after-charge"))
    return receipt
  })
)

const SqliteLive = SqliteClient.layer({ filename })

const program = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const receipt = yield* Checkout.execute({ orderId, amountCents: 1999 })
  yield* sql`INSERT INTO receipts (order_id, charge_id) VALUES (${orderId}, ${receipt.chargeId})`
}).pipe(
  Effect.provide(
    CheckoutLive.pipe(
      Layer.provideMerge(WorkflowEngine.layerMemory),
      Layer.provideMerge(SqlIdempotencyStore.layerWith({ migrate: true })),
      Layer.provideMerge(SqliteLive)
    )
  ),
  Effect.orDie
)

Children.runMain(program)
