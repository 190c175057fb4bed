import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Starts `server` on host:port (0 = any free port) and resolves to its `http://HOST:PORT` URL. */
export async function listen(server: Server, host: string, port: number): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const hostname = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${hostname}:${address.port}`;
}

export function closeServer(server: Server): Promise<void> {
  if (!server.listening) return Promise.resolve();
  return new Promise((resolve, reject) => {
    server.close((err) => (err ? reject(err) : resolve()));
    // Keep-alive sockets would hold close() open until they time out.
    server.closeAllConnections();
  });
}
