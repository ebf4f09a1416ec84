/** Placeholder until the shared redis-server setup lands. */
export default function setup(): void {}
