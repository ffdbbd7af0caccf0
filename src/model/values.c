/* values.c — scalar value grammars of the model: quantities, durations,
 * IPv4 addresses and CIDRs, Kubernetes names and labels; label selectors;
 * the error formatter. Pure functions, no allocation. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>

#include "md_int.h"

const char *md_err_str(const struct md_err *err, char *buf, size_t len)
{
	if (!err->file[0])	/* not about a file (a store's answer) */
		snprintf(buf, len, "%s", err->msg);
	else if (err->field[0])
		snprintf(buf, len, "%s:%d: %s: %s", err->file, err->line, err->field, err->msg);
	else
		snprintf(buf, len, "%s:%d: %s", err->file, err->line, err->msg);
	return buf;
}

int md_err_io(struct md_err *err, const char *path, int e, const char *what)
{
	snprintf(err->file, sizeof(err->file), "%.*s", (int)sizeof(err->file) - 1, path);
	err->line = 0;
	err->field[0] = 0;
	snprintf(err->msg, sizeof(err->msg), "%s: %s", what, strerror(e));
	return -e;
}

const char *md_labels_get(const struct md_labels *l, const char *key)
{
	for (int i = 0; i < l->n; i++)
		if (!strcmp(l->v[i].key, key))
			return l->v[i].value;
	return NULL;
}

/* present is not consulted: an absent selector is the caller's business,
 * and an empty one matches everything (Kubernetes LabelSelector). */
bool md_selector_matches(const struct md_selector *sel, const struct md_labels *labels)
{
	for (int i = 0; i < sel->match_labels.n; i++) {
		const char *v = md_labels_get(labels, sel->match_labels.v[i].key);

		if (!v || strcmp(v, sel->match_labels.v[i].value))
			return false;
	}
	for (int i = 0; i < sel->n_exprs; i++) {
		const struct md_sel_expr *e = &sel->exprs[i];
		const char *v = md_labels_get(labels, e->key);
		bool in = false;

		if (v)
			for (int j = 0; j < e->n_values && !in; j++)
				in = !strcmp(v, e->values[j]);
		switch (e->op) {
		case MD_SEL_IN:
			if (!in)
				return false;
			break;
		case MD_SEL_NOT_IN:
			if (in)
				return false;
			break;
		case MD_SEL_EXISTS:
			if (!v)
				return false;
			break;
		case MD_SEL_DOES_NOT_EXIST:
			if (v)
				return false;
			break;
		}
	}
	return true;
}

const char *md_proto_name(enum md_proto p)
{
	switch (p) {
	case MD_PROTO_UDP:
		return "UDP";
	case MD_PROTO_SCTP:
		return "SCTP";
	default:
		return "TCP";
	}
}

static const char *const kind_names[MD_K__COUNT] = {
	[MD_K_CLUSTER] = "Cluster",
	[MD_K_NAMESPACE] = "Namespace",
	[MD_K_CONFIGMAP] = "ConfigMap",
	[MD_K_POD] = "Pod",
	[MD_K_DEPLOYMENT] = "Deployment",
	[MD_K_SERVICE] = "Service",
	[MD_K_TRAFFICSPLIT] = "TrafficSplit",
	[MD_K_HTTPROUTE] = "HTTPRoute",
	[MD_K_NETPOL] = "NetworkPolicy",
	[MD_K_SERVICEACCOUNT] = "ServiceAccount",
	[MD_K_ROUTEGROUP] = "HTTPRouteGroup",
	[MD_K_GRPCROUTE] = "GRPCRoute",
	[MD_K_PEERAUTH] = "PeerAuthentication",
	[MD_K_AUTHZPOL] = "AuthorizationPolicy",
};

static const char *const kind_lower[MD_K__COUNT] = {
	[MD_K_CLUSTER] = "cluster",
	[MD_K_NAMESPACE] = "namespace",
	[MD_K_CONFIGMAP] = "configmap",
	[MD_K_POD] = "pod",
	[MD_K_DEPLOYMENT] = "deployment",
	[MD_K_SERVICE] = "service",
	[MD_K_TRAFFICSPLIT] = "trafficsplit",
	[MD_K_HTTPROUTE] = "httproute",
	[MD_K_NETPOL] = "networkpolicy",
	[MD_K_SERVICEACCOUNT] = "serviceaccount",
	[MD_K_ROUTEGROUP] = "httproutegroup",
	[MD_K_GRPCROUTE] = "grpcroute",
	[MD_K_PEERAUTH] = "peerauthentication",
	[MD_K_AUTHZPOL] = "authorizationpolicy",
};

const char *md_kind_name(enum md_kind k)
{
	return kind_names[k];
}

const char *md_kind_lower(enum md_kind k)
{
	return kind_lower[k];
}

bool md_kind_namespaced(enum md_kind k)
{
	return k != MD_K_CLUSTER && k != MD_K_NAMESPACE;
}

/* ---- quantities ---------------------------------------------------------------- */

/* Kubernetes resource.Quantity: [+]DIGITS[.DIGITS][SUFFIX], suffix one of
 * m k M G T P E (decimal), Ki Mi Gi Ti Pi Ei (binary), e/E<int> (exponent).
 * Fractions below one thousandth round up, as Kubernetes does. */
int md_quantity_milli(const char *s, uint64_t *out)
{
	unsigned __int128 num = 0, lim = (unsigned __int128)UINT64_MAX;
	int scale10 = 3, bin = 0, digits = 0, frac = 0;
	const char *p = s;

	if (!s || !*s)
		return -EINVAL;
	if (*p == '+')
		p++;
	for (; isdigit((unsigned char)*p); p++, digits++)
		if (digits < 30)
			num = num * 10 + (unsigned)(*p - '0');
		else
			return -EINVAL;
	if (*p == '.') {
		for (p++; isdigit((unsigned char)*p); p++, frac++, digits++)
			if (digits < 30)
				num = num * 10 + (unsigned)(*p - '0');
			else
				return -EINVAL;
		scale10 -= frac;
	}
	if (!digits)
		return -EINVAL;
	if (!*p) {
	} else if (!strcmp(p, "m")) {
		scale10 -= 3;
	} else if (p[1] == 0 && strchr("kMGTPE", *p)) {
		scale10 += 3 * (int)(strchr("kMGTPE", *p) - "kMGTPE" + 1);
	} else if (p[1] == 'i' && p[2] == 0 && strchr("KMGTPE", *p)) {
		bin = 10 * (int)(strchr("KMGTPE", *p) - "KMGTPE" + 1);
	} else if (*p == 'e' || *p == 'E') {
		int e = 0, sign = 1, nd = 0;

		p++;
		if (*p == '+' || *p == '-')
			sign = *p++ == '-' ? -1 : 1;
		for (; isdigit((unsigned char)*p); p++, nd++)
			if (nd < 3)
				e = e * 10 + (*p - '0');
			else
				return -EINVAL;
		if (!nd || *p)
			return -EINVAL;
		scale10 += sign * e;
	} else {
		return -EINVAL;
	}
	for (; bin > 0; bin--) {
		num <<= 1;
		if (num > lim)
			return -EINVAL;
	}
	for (; scale10 > 0; scale10--) {
		if (num && num > lim / 10)
			return -EINVAL;
		num *= 10;
	}
	if (scale10 < -37) {
		num = num ? 1 : 0;	/* a tiny positive value rounds up to 1m */
	} else if (scale10 < 0) {
		unsigned __int128 d = 1;

		for (; scale10 < 0; scale10++)
			d *= 10;
		num = (num + d - 1) / d;
	}
	if (num > lim)
		return -EINVAL;
	*out = (uint64_t)num;
	return 0;
}

/* ---- durations ---------------------------------------------------------------- */

/* Gateway API duration (GEP-2257): 1 to 4 of [0-9]{1,5}(h|m|s|ms). */
int md_duration_ms(const char *s, uint64_t *out)
{
	uint64_t total = 0;
	int parts = 0;
	const char *p = s;

	if (!s || !*s)
		return -EINVAL;
	while (*p) {
		uint64_t v = 0, mul;
		int nd = 0;

		for (; isdigit((unsigned char)*p); p++, nd++)
			v = v * 10 + (uint64_t)(*p - '0');
		if (nd < 1 || nd > 5 || ++parts > 4)
			return -EINVAL;
		if (p[0] == 'm' && p[1] == 's') {
			mul = 1;
			p += 2;
		} else if (*p == 'h') {
			mul = 3600000;
			p++;
		} else if (*p == 'm') {
			mul = 60000;
			p++;
		} else if (*p == 's') {
			mul = 1000;
			p++;
		} else {
			return -EINVAL;
		}
		total += v * mul;
	}
	*out = total;
	return 0;
}

/* ---- IPv4 ----------------------------------------------------------------------- */

int md_parse_ipv4(const char *s, uint32_t *ip)
{
	uint32_t v = 0;
	const char *p = s;

	if (!s)
		return -EINVAL;
	for (int i = 0; i < 4; i++) {
		unsigned o = 0;
		int nd = 0;

		if (i && *p++ != '.')
			return -EINVAL;
		if (p[0] == '0' && isdigit((unsigned char)p[1]))
			return -EINVAL;	/* leading zeros are ambiguous (octal) */
		for (; isdigit((unsigned char)*p) && nd < 4; p++, nd++)
			o = o * 10 + (unsigned)(*p - '0');
		if (!nd || nd > 3 || o > 255)
			return -EINVAL;
		v = v << 8 | o;
	}
	if (*p)
		return -EINVAL;
	*ip = htonl(v);
	return 0;
}

uint32_t md_mask(int len)
{
	return len <= 0 ? 0 : len >= 32 ? 0xffffffffu : ~((1u << (32 - len)) - 1);
}

int md_parse_cidr_loose(const char *s, uint32_t *net, int *len, bool *canonical)
{
	char buf[32];
	const char *slash = s ? strchr(s, '/') : NULL;
	int l = 0, nd = 0;
	uint32_t ip;

	if (!slash || (size_t)(slash - s) >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, (size_t)(slash - s));
	buf[slash - s] = 0;
	if (md_parse_ipv4(buf, &ip))
		return -EINVAL;
	for (const char *p = slash + 1; *p; p++, nd++) {
		if (!isdigit((unsigned char)*p) || nd >= 2)
			return -EINVAL;
		l = l * 10 + (*p - '0');
	}
	if (!nd || l > 32 || (nd == 2 && slash[1] == '0'))
		return -EINVAL;
	*canonical = (ntohl(ip) & ~md_mask(l)) == 0;
	*net = ip;
	*len = l;
	return 0;
}

int md_parse_cidr(const char *s, uint32_t *net, int *len)
{
	bool canon;

	if (md_parse_cidr_loose(s, net, len, &canon) || !canon)
		return -EINVAL;
	return 0;
}

/* ---- names -------------------------------------------------------------------- */

static bool alnum_lower(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

const char *md_check_dns_label(const char *s)
{
	size_t n = strlen(s);

	if (!n)
		return "must not be empty";
	if (n > 63)
		return "must be at most 63 characters";
	for (size_t i = 0; i < n; i++)
		if (!alnum_lower(s[i]) && s[i] != '-')
			return "must consist of lower case alphanumeric characters or '-'";
	if (!alnum_lower(s[0]) || !alnum_lower(s[n - 1]))
		return "must start and end with an alphanumeric character";
	return NULL;
}

const char *md_check_dns_subdomain(const char *s)
{
	size_t n = strlen(s);

	if (!n)
		return "must not be empty";
	if (n > 253)
		return "must be at most 253 characters";
	for (size_t i = 0; i < n; i++) {
		if (!alnum_lower(s[i]) && s[i] != '-' && s[i] != '.')
			return "must consist of lower case alphanumeric characters, '-' or '.'";
		if (s[i] == '.' && (i == 0 || !alnum_lower(s[i - 1]) || !alnum_lower(s[i + 1])))
			return "each '.'-separated part must start and end with an alphanumeric character";
	}
	if (!alnum_lower(s[0]) || !alnum_lower(s[n - 1]))
		return "must start and end with an alphanumeric character";
	return NULL;
}

static bool alnum(char c)
{
	return isalnum((unsigned char)c);
}

/* Label value, and the name part of a label key: <= 63, [A-Za-z0-9_.-],
 * starting and ending alphanumeric. */
const char *md_check_label_value(const char *s)
{
	size_t n = strlen(s);

	if (!n)
		return NULL;	/* empty values are allowed */
	if (n > 63)
		return "must be at most 63 characters";
	for (size_t i = 0; i < n; i++)
		if (!alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			return "must consist of alphanumeric characters, '-', '_' or '.'";
	if (!alnum(s[0]) || !alnum(s[n - 1]))
		return "must start and end with an alphanumeric character";
	return NULL;
}

const char *md_check_label_key(const char *s)
{
	const char *slash = strchr(s, '/');
	const char *name = slash ? slash + 1 : s;
	char prefix[254];

	if (slash) {
		size_t pl = (size_t)(slash - s);

		if (!pl || pl > 253)
			return "prefix must be a DNS subdomain of at most 253 characters";
		memcpy(prefix, s, pl);
		prefix[pl] = 0;
		if (md_check_dns_subdomain(prefix))
			return "prefix must be a DNS subdomain (lower case, '-', '.')";
	}
	if (!*name)
		return "name part must not be empty";
	return md_check_label_value(name);
}

const char *md_check_port_name(const char *s)
{
	size_t n = strlen(s);
	bool letter = false;

	if (!n || n > 15)
		return "must be 1 to 15 characters";
	for (size_t i = 0; i < n; i++) {
		if (!alnum_lower(s[i]) && s[i] != '-')
			return "must consist of lower case alphanumeric characters or '-'";
		if (s[i] >= 'a' && s[i] <= 'z')
			letter = true;
		if (s[i] == '-' && i && s[i - 1] == '-')
			return "must not contain consecutive '-'";
	}
	if (s[0] == '-' || s[n - 1] == '-')
		return "must not start or end with '-'";
	if (!letter)
		return "must contain at least one letter";
	return NULL;
}
