/**
 * Redis servers the tests start themselves, on 127.0.0.1 and free ports, stopped with their scope:
 * a single server (which a test may stop and start again on the same port) and a three-node
 * cluster. Nothing is persisted (`--save ""`, no AOF).
 */
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import { Redis } from "ioredis"
import type { ChildProcess } from "node:child_process"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"

export class ServerError extends Data.TaggedError("ServerError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

/** A port that was free a moment ago on 127.0.0.1 (nothing listens on it). */
export const freePort: Effect.Effect<number, ServerError> = Effect.async((resume) => {
  const server = net.createServer()
  server.once("error", (cause) => resume(Effect.fail(new ServerError({ message: "no free port", cause }))))
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() => resume(Effect.succeed(port)))
  })
})

const isExecutable = (file: string): boolean => {
  try {
    fs.accessSync(file, fs.constants.X_OK)
    return fs.statSync(file).isFile()
  } catch {
    return false
  }
}

/** `redis-server` (or `valkey-server`): `$REDIS_SERVER` when set, else the first on `PATH`. */
export const findRedisServer: Effect.Effect<Option.Option<string>> = Effect.sync(() => {
  const explicit = process.env.REDIS_SERVER
  if (explicit !== undefined && explicit !== "") return isExecutable(explicit) ? Option.some(explicit) : Option.none()
  const dirs = (process.env.PATH ?? "").split(path.delimiter).filter((dir) => dir !== "")
  for (const name of ["redis-server", "valkey-server"]) {
    for (const dir of dirs) {
      const candidate = path.join(dir, name)
      if (isExecutable(candidate)) return Option.some(candidate)
    }
  }
  return Option.none()
})

/** The binary, or a failure that says what to install. */
export const requireRedisServer: Effect.Effect<string, ServerError> = Effect.flatMap(
  findRedisServer,
  Option.match({
    onNone: () =>
      Effect.fail(
        new ServerError({
          message: "no redis-server (or valkey-server) on PATH: install Redis, or set REDIS_SERVER to the binary"
        })
      ),
    onSome: Effect.succeed
  })
)

const waitForExit = (child: ChildProcess, timeout: Duration.DurationInput): Effect.Effect<boolean> =>
  child.exitCode !== null || child.signalCode !== null
    ? Effect.succeed(true)
    : Effect.async<boolean>((resume) => {
      const onExit = () => resume(Effect.succeed(true))
      child.once("exit", onExit)
      child.once("error", onExit)
      return Effect.sync(() => {
        child.off("exit", onExit)
        child.off("error", onExit)
      })
    }).pipe(Effect.timeoutTo({ duration: timeout, onTimeout: () => false, onSuccess: (exited) => exited }))

const stop = (child: ChildProcess) =>
  Effect.gen(function*() {
    child.kill("SIGTERM")
    if (!(yield* waitForExit(child, "5 seconds"))) {
      child.kill("SIGKILL")
      yield* waitForExit(child, "5 seconds")
    }
  })

/** Answers `PING` (one short-lived connection, no retries). */
export const ping = (port: number): Effect.Effect<void, ServerError> =>
  Effect.acquireUseRelease(
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
    (client) =>
      Effect.tryPromise({
        try: () => client.connect().then(() => client.ping()),
        catch: (cause) => new ServerError({ message: `no Redis answers on 127.0.0.1:${port}`, cause })
      }),
    (client) => Effect.sync(() => client.disconnect())
  ).pipe(Effect.asVoid)

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
  Effect.gen(function*() {
    const output: Array<string> = []
    const child = yield* Effect.acquireRelease(
      Effect.try({
        try: () =>
          spawn(binary, [
            "--port",
            String(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
            ...extra
          ], { cwd, stdio: ["ignore", "pipe", "pipe"] }),
        catch: (cause) => new ServerError({ message: `${binary} could not be started`, cause })
      }),
      stop
    )
    // a last resort if the test process exits without closing the scope
    const killOnExit = () => child.kill("SIGKILL")
    process.once("exit", killOnExit)
    yield* Effect.addFinalizer(() => Effect.sync(() => process.off("exit", killOnExit)))
    child.on("error", (error) => output.push(String(error)))
    child.stdout?.on("data", (chunk: Buffer) => output.push(chunk.toString()))
    child.stderr?.on("data", (chunk: Buffer) => output.push(chunk.toString()))
    const exited = Effect.flatMap(
      waitForExit(child, Duration.infinity),
      () =>
        Effect.fail(
          new ServerError({
            message: `redis-server exited with ${child.exitCode ?? child.signalCode}: ${output.join("")}`
          })
        )
    )
    const ready = ping(port).pipe(
      Effect.retry(Schedule.spaced("50 millis")),
      Effect.timeoutFail({
        duration: "20 seconds",
        onTimeout: () => new ServerError({ message: `redis-server did not answer on ${port} within 20 seconds` })
      })
    )
    yield* Effect.raceFirst(ready, exited)
    return child
  })

/**
 * Starts `redis-server` on a free port of 127.0.0.1 (or on `port`), stopped with the scope.
 */
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

/** A command on a short-lived connection to one server. */
const command = (port: number, args: ReadonlyArray<string | number>): Effect.Effect<unknown, ServerError> =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const client = new Redis({ host: "127.0.0.1", port, lazyConnect: true, retryStrategy: () => null })
      client.on("error", () => {})
      return client
    }),
    (client) =>
      Effect.tryPromise({
        try: () => client.connect().then(() => client.call(String(args[0]), ...args.slice(1))),
        catch: (cause) => new ServerError({ message: `${args.join(" ")} failed on ${port}`, cause })
      }),
    (client) => Effect.sync(() => client.disconnect())
  )

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
          "--cluster-enabled",
          "yes",
          "--cluster-port",
          String(bus),
          "--cluster-config-file",
          "nodes.conf",
          "--cluster-node-timeout",
          "5000"
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
