/** Every row of one of the Store's paged reads (dumpJobs, jobsToRun...), for assertions. */
export async function all<T>(rows: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const r of rows) out.push(r);
  return out;
}
