import { IdempotencyStore } from "@effect-idempotency/core"
import { IdempotentConsumer } from "@effect-idempotency/queue"
import * as PersistedQueueConsumer from "@effect-idempotency/queue/PersistedQueueConsumer"
import * as Children from "@effect-idempotency/test-support/Children"
import { redisServer, requireRedisServer, unlinkKeys } from "@effect-idempotency/test-support/Redis"
import * as PersistedQueue from "@effect/experimental/PersistedQueue"
import * as RedisQueue from "@effect/experimental/PersistedQueue/Redis"
import { assert, describe, layer } from "@effect/vitest"
import type { Vitest } from "@effect/vitest"
import Database from "better-sqlite3"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import { Redis } from "ioredis"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const CHILD = fileURLToPath(new URL("./utils/persistedQueueChild.ts", import.meta.url))

const Order = Schema.Struct({ orderId: Schema.String, amountCents: Schema.Int })
type Order = typeof Order.Type

class Declined extends Schema.TaggedError<Declined>()("Declined", {}) {}

/** The Redis server of the file: `TEST_REDIS_URL` (database 15 unless it names one), else a `redis-server` started here. */
class RedisUrl extends Context.Tag("test/RedisUrl")<RedisUrl, string>() {}

const configured = process.env.TEST_REDIS_URL === "" ? undefined : process.env.TEST_REDIS_URL

const RedisUrlLive = Layer.scoped(
  RedisUrl,
  configured !== undefined
    ? Effect.sync(() => {
      const url = new URL(configured)
      if (url.hostname !== "127.0.0.1" && url.hostname !== "localhost") {
        throw new Error(`TEST_REDIS_URL must name a loopback server, not ${url.hostname}`)
      }
      if (url.pathname === "" || url.pathname === "/") url.pathname = "/15"
      return url.toString()
    })
    : Effect.map(Effect.flatMap(requireRedisServer, (binary) => redisServer(binary)), (server) => server.url)
)

const redisOptions = (url: string) => {
  const parsed = new URL(url)
  return {
    host: parsed.hostname,
    port: Number(parsed.port === "" ? 6379 : parsed.port),
    db: parsed.pathname.length > 1 ? Number(parsed.pathname.slice(1)) : 0
  }
}

/** A prefix of the test's own on the Redis server, its keys deleted when the test ends. */
const uniquePrefix = Effect.gen(function*() {
  const url = yield* RedisUrl
  const prefix = `effect-idempotency-test:pq:${randomUUID().slice(0, 8)}:`
  yield* Effect.addFinalizer(() =>
    Effect.acquireUseRelease(
      Effect.sync(() => new Redis(url, { maxRetriesPerRequest: 1 })),
      (client) => Effect.promise(() => unlinkKeys(client, `${prefix}*`)),
      (client) => Effect.sync(() => client.disconnect())
    ).pipe(Effect.ignore)
  )
  return { url, prefix }
})

type Kind = "memory" | "redis"

/** A fresh queue store of the kind, and the idempotency store, for one test. */
const stores = (kind: Kind) =>
  Effect.gen(function*() {
    const store = kind === "memory"
      ? PersistedQueue.layerStoreMemory
      : yield* Effect.map(uniquePrefix, ({ prefix, url }) =>
        RedisQueue.layerStore({
          ...redisOptions(url),
          prefix,
          // the default lock settings: the store's reset pass runs at the first take only (README.md#persistedqueue)
          pollInterval: "20 millis"
        }))
    return Layer.merge(PersistedQueue.layer.pipe(Layer.provide(store)), IdempotencyStore.layerMemory)
  })

/** The downstream: each charge it made, by order id, in order. */
const ledger = Ref.make<ReadonlyArray<string>>([])

const charge = (charges: Ref.Ref<ReadonlyArray<string>>) => (order: Order) =>
  Effect.as(Ref.update(charges, (all) => [...all, order.orderId]), `ch_${order.orderId}`)

const consumerOf = (charges: Ref.Ref<ReadonlyArray<string>>, keyOf?: (order: Order) => string) =>
  IdempotentConsumer.make({
    name: "charge-order",
    payload: Order,
    success: Schema.String,
    execute: charge(charges),
    retryDelay: "20 millis",
    maxDeliveries: 3,
    timeout: "1 second",
    keyOf
  })

/** A consumer that also notes each delivery it handled and how it settled it. */
const noting = <R>(consumer: IdempotentConsumer.Consumer<Order, R>) =>
  Effect.map(
    Ref.make<ReadonlyArray<readonly [IdempotentConsumer.Delivery, IdempotentConsumer.Settlement]>>([]),
    (seen) => ({
      seen,
      consumer: {
        ...consumer,
        handle: (delivery: IdempotentConsumer.Delivery, order: Order) =>
          Effect.tap(consumer.handle(delivery, order), (settlement) =>
            Ref.update(seen, (all) => [...all, [delivery, settlement] as const]))
      } satisfies IdempotentConsumer.Consumer<Order, R>
    })
  )

/** Nothing is left to take: a take waits a second and finds nothing. */
const nothingLeft = (queue: PersistedQueue.PersistedQueue<Order>) =>
  Effect.map(
    queue.take((order, metadata) => Effect.succeed({ order, metadata })).pipe(Effect.timeoutOption("1 second")),
    (taken) => assert.isTrue(Option.isNone(taken), `left in the queue: ${JSON.stringify(taken)}`)
  )

const order = (orderId: string, amountCents = 1999): Order => ({ orderId, amountCents })

/** Runs `program` on a fresh queue store of the kind and a fresh idempotency store. */
const withStores = <A, E, R>(kind: Kind, program: Effect.Effect<A, E, R>) =>
  Effect.flatMap(stores(kind), (layer) => Effect.provide(program, layer))

type It = Vitest.MethodsNonLive<RedisUrl, true>

const suite = (it: It, kind: Kind) =>
  describe(`on the ${kind} queue store`, () => {
    it.scoped("a take that fails after the outcome is recorded: the element comes back and replays, one charge", () =>
      withStores(
        kind,
        Effect.gen(function*() {
          const charges = yield* ledger
          const { consumer: inner, seen } = yield* noting(consumerOf(charges))
          const crashed = yield* Ref.make(false)
          // the taker fails once, after the record and before the queue completes the element
          const consumer: typeof inner = {
            ...inner,
            handle: (delivery, payload) =>
              Effect.flatMap(
                inner.handle(delivery, payload),
                (settlement) =>
                  Effect.flatMap(
                    Ref.getAndSet(crashed, true),
                    (before) => before ? Effect.succeed(settlement) : Effect.die("the taker failed after the record")
                  )
              )
          }
          const queue = yield* PersistedQueue.make({ name: "orders", schema: Order })
          yield* queue.offer(order("o-1"), { id: "order-1" })
          const first = yield* Effect.exit(PersistedQueueConsumer.take(queue, consumer))
          assert.isTrue(Exit.isFailure(first))
          const second = yield* PersistedQueueConsumer.take(queue, consumer)
          assert.deepStrictEqual(second, IdempotentConsumer.Settlement.Ack({ replayed: true }))
          assert.deepStrictEqual((yield* Ref.get(seen)).map(([delivery]) => delivery), [
            { key: "order-1", deliveryCount: 1 },
            { key: "order-1", deliveryCount: 2 }
          ])
          assert.deepStrictEqual(yield* Ref.get(charges), ["o-1"])
          yield* nothingLeft(queue)
        })
      ))

    it.scoped("a domain failure is retried (the queue counts each take) until maxDeliveries, then rejected and completed", () =>
      withStores(
        kind,
        Effect.gen(function*() {
          const runs = yield* Ref.make(0)
          const consumer = IdempotentConsumer.make({
            name: "charge-order",
            payload: Order,
            success: Schema.String,
            failure: Declined,
            execute: () => Effect.zipRight(Ref.update(runs, (n) => n + 1), Effect.fail(new Declined())),
            // released: each delivery runs the handler again
            onFailure: () => "release",
            retryDelay: "20 millis",
            maxDeliveries: 3
          })
          const rejected = yield* Ref.make<ReadonlyArray<PersistedQueueConsumer.Rejected>>([])
          const queue = yield* PersistedQueue.make({ name: "orders", schema: Order })
          yield* queue.offer(order("o-1"), { id: "order-1" })
          const settlements: Array<string> = []
          for (let i = 0; i < 3; i++) {
            const settlement = yield* PersistedQueueConsumer.take(queue, consumer, {
              onReject: (_, element) => Ref.update(rejected, (all) => [...all, element])
            })
            settlements.push(settlement._tag)
          }
          assert.deepStrictEqual(settlements, ["Retry", "Retry", "Reject"])
          assert.strictEqual(yield* Ref.get(runs), 3)
          assert.deepStrictEqual(yield* Ref.get(rejected), [
            { id: "order-1", deliveryCount: 3, reason: "Declined, after 3 deliveries" }
          ])
          yield* nothingLeft(queue)
        })
      ))

    it.scoped("an id offered again, before and after it was taken: one element, one charge", () =>
      withStores(
        kind,
        Effect.gen(function*() {
          const charges = yield* ledger
          const consumer = consumerOf(charges)
          const queue = yield* PersistedQueue.make({ name: "orders", schema: Order })
          yield* queue.offer(order("o-1"), { id: "order-1" })
          yield* queue.offer(order("o-1"), { id: "order-1" })
          assert.deepStrictEqual(
            yield* PersistedQueueConsumer.take(queue, consumer),
            IdempotentConsumer.Settlement.Ack({ replayed: false })
          )
          yield* queue.offer(order("o-1"), { id: "order-1" })
          yield* nothingLeft(queue)
          assert.deepStrictEqual(yield* Ref.get(charges), ["o-1"])
        })
      ))

    it.scoped("one order under two element ids, keyed by keyOf: the second replays, one charge", () =>
      withStores(
        kind,
        Effect.gen(function*() {
          const charges = yield* ledger
          const consumer = consumerOf(charges, (order) => order.orderId)
          const queue = yield* PersistedQueue.make({ name: "orders", schema: Order })
          // a producer that retried its offer without an id: the queue gives each a fresh one
          yield* queue.offer(order("o-1"))
          yield* queue.offer(order("o-1"))
          const settlements = [
            yield* PersistedQueueConsumer.take(queue, consumer),
            yield* PersistedQueueConsumer.take(queue, consumer)
          ]
          assert.deepStrictEqual(settlements, [
            IdempotentConsumer.Settlement.Ack({ replayed: false }),
            IdempotentConsumer.Settlement.Ack({ replayed: true })
          ])
          assert.deepStrictEqual(yield* Ref.get(charges), ["o-1"])
          yield* nothingLeft(queue)
        })
      ))

    it.scoped("a key reused with another body is rejected, completed and handed to onReject, not charged", () =>
      withStores(
        kind,
        Effect.gen(function*() {
          const charges = yield* ledger
          const consumer = consumerOf(charges, (order) => order.orderId)
          const rejected = yield* Ref.make<ReadonlyArray<readonly [Order, PersistedQueueConsumer.Rejected]>>([])
          const onReject = (order: Order, element: PersistedQueueConsumer.Rejected) =>
            Ref.update(rejected, (all) => [...all, [order, element] as const])
          const queue = yield* PersistedQueue.make({ name: "orders", schema: Order })
          yield* queue.offer(order("o-1", 1999), { id: "a" })
          yield* queue.offer(order("o-1", 2500), { id: "b" })
          assert.strictEqual((yield* PersistedQueueConsumer.take(queue, consumer, { onReject }))._tag, "Ack")
          assert.deepStrictEqual(
            yield* PersistedQueueConsumer.take(queue, consumer, { onReject }),
            IdempotentConsumer.Settlement.Reject({ reason: "KeyReused" })
          )
          assert.deepStrictEqual(yield* Ref.get(rejected), [
            [order("o-1", 2500), { id: "b", deliveryCount: 1, reason: "KeyReused" }]
          ])
          assert.deepStrictEqual(yield* Ref.get(charges), ["o-1"])
          yield* nothingLeft(queue)
        })
      ))

    it.scoped("eight takers on 40 orders, each offered under two ids and once more: one charge per order", () =>
      withStores(
        kind,
        Effect.gen(function*() {
          const charges = yield* ledger
          const { consumer, seen } = yield* noting(consumerOf(charges, (order) =>
            order.orderId))
          const queue = yield* PersistedQueue.make({ name: "orders", schema: Order })
          const orders = Array.from({ length: 40 }, (_, i) => `o-${i}`)
          const ids = orders.flatMap((orderId) => [`${orderId}-a`, `${orderId}-b`])
          const runner = yield* Effect.fork(
            PersistedQueueConsumer.run(queue, consumer, { concurrency: 8, failurePause: "20 millis" })
          )
          yield* Effect.forEach(orders, (orderId) =>
            Effect.forEach(
              [`${orderId}-a`, `${orderId}-b`, `${orderId}-a`],
              (id) => queue.offer(order(orderId), { id })
            ))
          // every element acknowledged (bounded: conflicts wait for the holder's lease)
          const acked = Effect.map(
            Ref.get(seen),
            (all) =>
              new Set(
                all.filter(([, settlement]) => settlement._tag === "Ack").map(([delivery]) => delivery.key)
              )
          )
          yield* acked.pipe(
            Effect.repeat({
              schedule: Schedule.spaced("50 millis"),
              until: (keys) => keys.size === ids.length
            }),
            Effect.timeout("40 seconds")
          )
          yield* Fiber.interrupt(runner)
          const all = yield* Ref.get(charges)
          assert.deepStrictEqual([...all].sort(), [...orders].sort())
          assert.deepStrictEqual([...(yield* acked)].sort(), [...ids].sort())
          yield* nothingLeft(queue)
        })
      ), { timeout: 60_000 })

    it.scoped("a concurrency that is not a finite number still starts one taker", () =>
      withStores(
        kind,
        Effect.gen(function*() {
          const charges = yield* ledger
          const queue = yield* PersistedQueue.make({ name: "orders", schema: Order })
          const runner = yield* Effect.fork(
            PersistedQueueConsumer.run(queue, consumerOf(charges), { concurrency: Number.NaN })
          )
          yield* queue.offer(order("o-nan"), { id: "nan" })
          yield* Ref.get(charges).pipe(
            Effect.repeat({
              schedule: Schedule.spaced("20 millis"),
              until: (all) =>
                all.length > 0
            }),
            Effect.timeout("20 seconds")
          )
          yield* Fiber.interrupt(runner)
          assert.deepStrictEqual(yield* Ref.get(charges), ["o-nan"])
        })
      ))
  })

// across processes: the Redis queue, and the charges and records in one SQLite file ----------------

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

const chargesIn = (filename: string) =>
  withFile(
    filename,
    (db) => db.prepare("SELECT order_id FROM charges ORDER BY order_id").all() as Array<{ readonly order_id: string }>
  )

/** A SQLite file with the `charges` table, a queue prefix of the test's own, and the queue to offer to. */
const setUp = Effect.gen(function*() {
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "idem-pq-"))),
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
  const { prefix, url } = yield* uniquePrefix
  const context = yield* Layer.build(
    PersistedQueue.layer.pipe(Layer.provide(RedisQueue.layerStore({ ...redisOptions(url), prefix })))
  )
  const queue = yield* Effect.provide(PersistedQueue.make({ name: "orders", schema: Order }), context)
  return { filename, prefix, url, queue, args: [url, prefix, "orders", filename] }
})

layer(RedisUrlLive, { timeout: 60_000, excludeTestServices: true })((it) => {
  suite(it, "memory")
  suite(it, "redis")

  describe("the Redis store's reset pass, every 200 ms while elements are in hand", () => {
    it.scoped(
      "one taker: the copies it pushes replay, no element is lost, one charge per order",
      () =>
        Effect.gen(function*() {
          const { prefix, url } = yield* uniquePrefix
          const charges = yield* ledger
          const { consumer, seen } = yield* noting(IdempotentConsumer.make({
            name: "charge-order",
            payload: Order,
            success: Schema.String,
            // longer than the pass's period: each element is in hand during one
            execute: (order) => Effect.zipRight(Effect.sleep("250 millis"), charge(charges)(order)),
            retryDelay: "20 millis"
          }))
          const program = Effect.gen(function*() {
            const queue = yield* PersistedQueue.make({ name: "orders", schema: Order })
            const orders = Array.from({ length: 10 }, (_, i) => `o-${i}`)
            yield* Effect.forEach(orders, (orderId) => queue.offer(order(orderId), { id: orderId }))
            const runner = yield* Effect.fork(PersistedQueueConsumer.run(queue, consumer))
            const acked = Effect.map(Ref.get(seen), (all) =>
              new Set(
                all.filter(([, settlement]) => settlement._tag === "Ack").map(([delivery]) => delivery.key)
              ))
            yield* acked.pipe(
              Effect.repeat({
                schedule: Schedule.spaced("50 millis"),
                until: (keys) => keys.size === orders.length
              }),
              Effect.timeout("40 seconds")
            )
            // then the copies, until none comes for 1.5 s (bounded)
            const settled = Effect.map(Ref.get(seen), (all) => all.length)
            yield* Effect.zip(settled, Effect.zipRight(Effect.sleep("1500 millis"), settled)).pipe(
              Effect.repeat({ until: ([before, after]) => before === after }),
              Effect.timeout("40 seconds")
            )
            yield* Fiber.interrupt(runner)
            assert.deepStrictEqual([...(yield* Ref.get(charges))].sort(), orders)
            // the pass did push copies, and each replayed
            const replays = (yield* Ref.get(seen)).filter(([, settlement]) =>
              settlement._tag === "Ack" && settlement.replayed
            )
            assert.isAbove(replays.length, 0)
            assert.isTrue((yield* Ref.get(seen)).every(([, settlement]) => settlement._tag === "Ack"))
          })
          yield* Effect.provide(
            program,
            Layer.merge(
              PersistedQueue.layer.pipe(Layer.provide(RedisQueue.layerStore({
                ...redisOptions(url),
                prefix,
                pollInterval: "20 millis",
                lockExpiration: "1 second",
                lockRefreshInterval: "200 millis"
              }))),
              IdempotencyStore.layerMemory
            )
          )
        }),
      { timeout: 60_000 }
    )
  })

  describe("takers in processes of their own, on the Redis queue store", () => {
    for (const [point, chargedAtKill] of [["in-handler", 0], ["after-write", 0], ["before-complete", 1]] as const) {
      it.scoped(
        `a taker killed ${point}: another process takes the element again, and there is one charge`,
        () =>
          Effect.gen(function*() {
            const { args, filename, queue } = yield* setUp
            yield* queue.offer(order("o-1"), { id: "order-1" })
            assert.strictEqual(yield* Children.runUntilMarker(CHILD, [...args, point]), `PAUSED ${point} (SIGKILL)`)
            // what the killed process left: nothing uncommitted survives it
            assert.strictEqual((yield* chargesIn(filename)).length, chargedAtKill)
            // every copy of the element the store hands out is answered from the record
            assert.match(yield* Children.runUntilMarker(CHILD, [...args, "finish"]), /^DONE/)
            assert.deepStrictEqual(yield* chargesIn(filename), [{ order_id: "o-1" }])
            yield* nothingLeft(queue)
          }),
        { timeout: 90_000 }
      )
    }

    it.scoped(
      "two processes taking 60 orders, each offered under two ids: one charge per order",
      () =>
        Effect.gen(function*() {
          const { args, filename, queue } = yield* setUp
          const orders = Array.from({ length: 60 }, (_, i) => `o-${String(i).padStart(2, "0")}`)
          // both takers start before the first offer, and are killed when the test ends
          const stderr: Array<string> = []
          for (let i = 0; i < 2; i++) {
            const child = yield* Effect.acquireRelease(
              Effect.sync(() => Children.start(CHILD, [...args, "run"])),
              (child) => Effect.sync(() => child.kill("SIGKILL"))
            )
            child.stderr.on("data", (chunk: Buffer) => stderr.push(chunk.toString()))
            yield* Effect.async<void>((resume) => {
              child.stdout.on("data", (chunk: Buffer) => {
                if (chunk.toString().includes("RUNNING")) resume(Effect.void)
              })
            })
          }
          yield* Effect.forEach(
            orders,
            (orderId) => Effect.forEach([`${orderId}-a`, `${orderId}-b`], (id) => queue.offer(order(orderId), { id }))
          )
          // until every order is charged and the queue is drained (bounded)
          const charged = Effect.map(chargesIn(filename), (rows) => new Set(rows.map((row) => row.order_id)).size)
          yield* charged.pipe(
            Effect.repeat({ schedule: Schedule.spaced("100 millis"), until: (n) => n === orders.length }),
            Effect.timeout("60 seconds"),
            Effect.tapError(() => Effect.sync(() => console.error(stderr.join("").slice(-4000))))
          )
          yield* nothingLeft(queue)
          assert.deepStrictEqual((yield* chargesIn(filename)).map((row) => row.order_id), orders)
        }),
      { timeout: 90_000 }
    )
  })
})
