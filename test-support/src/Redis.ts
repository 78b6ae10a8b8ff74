/**
 * Redis servers the tests and the benchmark start themselves, on 127.0.0.1 and free ports, stopped
 * with their scope: a single server (which a test may stop and start again on the same port) and a
 * three-node cluster. Nothing is persisted (`--save ""`, no AOF).
 *
 * @example
 * const server = yield* Effect.flatMap(Redis.requireRedisServer, (binary) => Redis.redisServer(binary))
 * // server.url: redis://127.0.0.1:40123
 */
import * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import { Redis } from "ioredis"
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { findExecutable, freePort, requireExecutable, ServerError, spawn, stop } from "./Servers.js"

const NAMES = ["redis-server", "valkey-server"]

/** `redis-server` (or `valkey-server`): `$REDIS_SERVER` when set, else the first on `PATH`. */
export const findRedisServer: Effect.Effect<Option.Option<string>, ServerError> = findExecutable(NAMES, {
  variable: "REDIS_SERVER"
})

/** The binary, or a failure that says what to install. */
export const requireRedisServer: Effect.Effect<string, ServerError> = requireExecutable(
  NAMES,
  "no redis-server (or valkey-server) on PATH: install Redis, or set REDIS_SERVER to the binary",
  { variable: "REDIS_SERVER" }
)

/** A client on a short-lived connection to one server, which never retries. */
const connection = (port: number) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const client = new Redis({
        host: "127.0.0.1",
        port,
        lazyConnect: true,
        connectTimeout: 1000,
        commandTimeout: 1000,
        maxRetriesPerRequest: 0,
        enableOfflineQueue: false,
        retryStrategy: () => null
      })
      client.on("error", () => {})
      return client
    }),
    (client) => Effect.sync(() => client.disconnect())
  )

/** A command on a short-lived connection to one server. */
const command = (port: number, args: ReadonlyArray<string | number>): Effect.Effect<unknown, ServerError> =>
  Effect.scoped(Effect.flatMap(connection(port), (client) =>
    Effect.tryPromise({
      try: () => client.connect().then(() => client.call(String(args[0]), ...args.slice(1))),
      catch: (cause) => new ServerError({ message: `${args.join(" ")} failed on ${port}`, cause })
    })))

/** Answers `PING` (one short-lived connection, no retries). */
export const ping = (port: number): Effect.Effect<void, ServerError> =>
  command(port, ["PING"]).pipe(
    Effect.mapError((cause) => new ServerError({ message: `no Redis answers on 127.0.0.1:${port}`, cause })),
    Effect.asVoid
  )

/** A `redis-server` process, which a test may stop and start again on the same port. */
export interface RedisServer {
  readonly port: number
  readonly url: string
  /** Stops the process (SIGTERM); its data is gone. */
  readonly stop: Effect.Effect<void>
  /** Starts it again on the same port and waits until it answers. */
  readonly start: Effect.Effect<void, ServerError>
}

const spawnServer = (
  binary: string,
  port: number,
  extra: ReadonlyArray<string>,
  cwd: string
): Effect.Effect<ChildProcess, ServerError, Scope.Scope> =>
  spawn({
    name: "redis-server",
    command: binary,
    args: [
      ...["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
      ...["--daemonize", "no", "--loglevel", "warning"],
      ...extra
    ],
    cwd,
    ready: ping(port),
    interval: "50 millis",
    timeout: "20 seconds"
  })

/** Starts `redis-server` on a free port of 127.0.0.1 (or on `port`), stopped with the scope. */
export const redisServer = (
  binary: string,
  options?: { readonly port?: number | undefined; readonly args?: ReadonlyArray<string> | undefined }
): Effect.Effect<RedisServer, ServerError, Scope.Scope> =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const port = options?.port ?? (yield* freePort)
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "effect-idempotency-redis-"))),
      (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
    )
    let current: ChildProcess | undefined = yield* spawnServer(binary, port, options?.args ?? [], dir)
    return {
      port,
      url: `redis://127.0.0.1:${port}`,
      stop: Effect.suspend(() => {
        const child = current
        current = undefined
        return child === undefined ? Effect.void : stop(child)
      }),
      // a restarted process lives as long as the server's scope
      start: Effect.suspend(() =>
        current !== undefined
          ? Effect.void
          : Effect.map(Scope.extend(spawnServer(binary, port, options?.args ?? [], dir), scope), (child) => {
            current = child
          })
      )
    }
  })

/** A Redis Cluster: three masters on loopback, the 16384 slots split between them. */
export interface RedisCluster {
  readonly ports: ReadonlyArray<number>
}

/** Starts a three-node cluster (no replicas), stopped with the scope. */
export const redisCluster = (binary: string): Effect.Effect<RedisCluster, ServerError, Scope.Scope> =>
  Effect.gen(function*() {
    const ranges = [[0, 5460], [5461, 10922], [10923, 16383]] as const
    const ports: Array<number> = []
    // each node listens on two ports: clients' and the cluster bus's (by default the first plus
    // 10000, which may be taken or out of range), so both are chosen free; a port taken by another
    // process between the choice and the bind fails the start, which then tries other ports
    const node = Effect.gen(function*() {
      const port = yield* freePort
      let bus = yield* freePort
      for (let i = 0; i < 5 && bus === port; i++) bus = yield* freePort
      yield* redisServer(binary, {
        port,
        args: [
          ...["--cluster-enabled", "yes", "--cluster-port", String(bus)],
          ...["--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"]
        ]
      })
      return { port, bus }
    })
    const buses = new Map<number, number>()
    for (let i = 0; i < ranges.length; i++) {
      const { bus, port } = yield* Effect.retry(node, { times: 3 })
      ports.push(port)
      buses.set(port, bus)
    }
    for (const [i, [first, last]] of ranges.entries()) {
      yield* command(ports[i]!, ["CLUSTER", "ADDSLOTSRANGE", first, last])
    }
    for (const port of ports.slice(1)) {
      yield* command(ports[0]!, ["CLUSTER", "MEET", "127.0.0.1", port, buses.get(port)!])
    }
    const settled = Effect.forEach(
      ports,
      (port) =>
        Effect.flatMap(
          command(port, ["CLUSTER", "INFO"]),
          (info) =>
            String(info).includes("cluster_state:ok") && String(info).includes(`cluster_known_nodes:${ranges.length}`)
              ? Effect.void
              : Effect.fail(new ServerError({ message: `the cluster node on ${port} is not ready: ${String(info)}` }))
        )
    )
    yield* settled.pipe(
      Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo("30 seconds")))
    )
    return { ports }
  })

/** Deletes every key matching `pattern` (`SCAN` page by page, then `UNLINK`). */
export const unlinkKeys = async (client: Redis, pattern: string): Promise<void> => {
  let cursor = "0"
  do {
    const [next, keys] = await client.scan(cursor, "MATCH", pattern, "COUNT", 1000)
    cursor = next
    if (keys.length > 0) await client.unlink(...keys)
  } while (cursor !== "0")
}
