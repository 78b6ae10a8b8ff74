// A min-heap of (expiresAt, id); an entry whose record was rewritten since is stale, and skipped.
export class ExpiryQueue {
  private times: Array<number> = []
  private ids: Array<string> = []

  get size(): number {
    return this.times.length
  }

  push(expiresAt: number, id: string): void {
    const times = this.times
    const ids = this.ids
    let i = times.length
    times.push(expiresAt)
    ids.push(id)
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (times[parent]! <= expiresAt) break
      times[i] = times[parent]!
      ids[i] = ids[parent]!
      i = parent
    }
    times[i] = expiresAt
    ids[i] = id
  }

  peek(): number {
    return this.times.length === 0 ? Infinity : this.times[0]!
  }

  pop(): string {
    const times = this.times
    const ids = this.ids
    const id = ids[0]!
    const lastTime = times.pop()!
    const lastId = ids.pop()!
    const n = times.length
    if (n === 0) {
      // let go of the backing stores, which do not shrink as they empty
      this.times = []
      this.ids = []
    } else {
      let i = 0
      while (true) {
        const left = 2 * i + 1
        if (left >= n) break
        const right = left + 1
        const child = right < n && times[right]! < times[left]! ? right : left
        if (times[child]! >= lastTime) break
        times[i] = times[child]!
        ids[i] = ids[child]!
        i = child
      }
      times[i] = lastTime
      ids[i] = lastId
    }
    return id
  }
}
