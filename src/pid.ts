/** Where a process id means something: ids are only comparable between processes of one pid namespace. */
import { readlinkSync } from 'node:fs'

/** The pid namespace of this process (Linux: the inode of /proc/self/ns/pid), or '' where it cannot be read. @internal */
export function pidNamespace(): string {
  try {
    return readlinkSync('/proc/self/ns/pid').replace(/\D/g, '')
  } catch {
    return ''
  }
}
