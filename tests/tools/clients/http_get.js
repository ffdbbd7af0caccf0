// http_get.js — the Node.js clients of tests/e2e/36-client-matrix.t:
//   node http_get.js http|fetch URL...
// http: the `http` module (prints the socket's remoteAddress: getpeername);
// fetch: the global fetch (undici). Prints per URL "<status> <hostname> [peer]"
// or "ERR <why>".
'use strict';
const http = require('http');
const [mode, ...urls] = process.argv.slice(2);
const hostOf = (b) => { const m = /"hostname":"([^"]*)"/.exec(b); return m ? m[1] : '?'; };

function viaHttp(u) {
	return new Promise((resolve) => {
		const req = http.get(u, { timeout: 5000 }, (res) => {
			const a = res.socket.remoteAddress;
			const peer = (a.includes(':') ? `[${a}]` : a) + ':' + res.socket.remotePort;
			let b = '';
			res.on('data', (d) => { b += d; });
			res.on('end', () => resolve(`${res.statusCode} ${hostOf(b)} ${peer}`));
		});
		req.on('timeout', () => req.destroy(new Error('timeout')));
		req.on('error', (e) => resolve('ERR ' + (e.code || e.message)));
	});
}

async function viaFetch(u) {
	try {
		const r = await fetch(u, { signal: AbortSignal.timeout(5000) });
		return `${r.status} ${hostOf(await r.text())}`;
	} catch (e) {
		return 'ERR ' + ((e.cause && e.cause.code) || e.name);
	}
}

(async () => {
	for (const u of urls)
		console.log(await (mode === 'fetch' ? viaFetch(u) : viaHttp(u)));
})();
