import * as Children from "@effect-idempotency/test-support/Children"
import { assert, describe, inject, it } from "@effect/vitest"
import Database from "better-sqlite3"
import * as Effect from "effect/Effect"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Connection } from "rabbitmq-client"

const CHILD = fileURLToPath(new URL("./utils/rabbitChild.ts", import.meta.url))

/** Runs `f` on a connection of its own to the file, closed at once: the test holds no lock between steps. */
const withFile = <A>(filename: string, f: (db: Database.Database) => A) =>
  Effect.sync(() => {
    const db = new Database(filename, { timeout: 5000 })
    try {
      return f(db)
    } finally {
      db.close()
    }
  })

const charges = (filename: string) =>
  withFile(filename, (db) => db.prepare("SELECT order_id FROM charges").all() as Array<{ readonly order_id: string }>)

/** A SQLite file with the `charges` table, and a queue of the test's own with one order in it. */
const setUp = Effect.gen(function*() {
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "idem-queue-"))),
    (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
  )
  const filename = path.join(dir, "orders.db")
  yield* withFile(
    filename,
    (db) =>
      db.exec(
        "CREATE TABLE charges (charge_id TEXT PRIMARY KEY, order_id TEXT NOT NULL, amount_cents INTEGER NOT NULL)"
      )
  )
  const connection = yield* Effect.acquireRelease(
    Effect.promise(async () => {
      const connection = new Connection(inject("amqpUrl"))
      connection.on("error", () => {})
      await connection.onConnect(10_000)
      return connection
    }),
    (connection) => Effect.promise(() => connection.close())
  )
  const queue = `idem-kill-${randomUUID().slice(0, 8)}`
  yield* Effect.acquireRelease(
    Effect.promise(() => connection.queueDeclare({ queue, durable: true, arguments: { "x-queue-type": "quorum" } })),
    () => Effect.promise(() => connection.queueDelete({ queue })).pipe(Effect.ignore)
  )
  yield* Effect.acquireUseRelease(
    Effect.sync(() => connection.createPublisher({ confirm: true })),
    (publisher) =>
      Effect.promise(() =>
        publisher.send(
          { routingKey: queue, messageId: "order-1", contentType: "application/json", durable: true },
          { orderId: "order-1", amountCents: 1999 }
        )
      ),
    (publisher) => Effect.promise(() => publisher.close())
  )
  return { filename, connection, queue }
})

describe("a RabbitMQ consumer killed with SIGKILL, its charges and records in one SQLite transaction", () => {
  for (const [point, chargedAtKill] of [["in-handler", 0], ["after-write", 0], ["before-ack", 1]] as const) {
    it.scoped(`at ${point}: the message comes back, and there is one charge`, () =>
      Effect.gen(function*() {
        const { connection, filename, queue } = yield* setUp
        const args = [inject("amqpUrl"), queue, filename]
        assert.strictEqual(yield* Children.runUntilMarker(CHILD, [...args, point]), `PAUSED ${point} (SIGKILL)`)
        // what the killed process left: nothing uncommitted survives it
        assert.strictEqual((yield* charges(filename)).length, chargedAtKill)
        assert.match(yield* Children.runUntilMarker(CHILD, [...args, "finish"]), /^DONE/)
        assert.deepStrictEqual(yield* charges(filename), [{ order_id: "order-1" }])
        // acknowledged: nothing is left in the queue, not even unacknowledged
        const { messageCount } = yield* Effect.promise(() => connection.queueDeclare({ queue, passive: true }))
        assert.strictEqual(messageCount, 0)
      }), { timeout: 90_000 })
  }
})
