/*
 * The real STATIC libibverbs/librdmacm, driven by a list of operations.
 *
 *     static_probe OP...
 *
 * Built by tests/oracle/static.py with `gcc -static` against libibverbs.a and
 * librdmacm.a, with or without -DRDMA_STATIC_PROVIDERS=..., and run on a fixture
 * tree through tests/oracle/harness.py.  Each operation prints one JSON object on
 * stdout, in the shapes of tests/oracle/probe.py (list, free) and
 * tests/oracle/rdmacm_probe.py (rdma_get, rdma_free, ibv_list), so a test compares
 * the parsed results with those probes' results for sysverbs:
 *
 *   list          ibv_get_device_list and each device's fields; the list is kept
 *   free K        ibv_free_device_list of the K-th list that `list` returned
 *   rdma_get      rdma_get_devices: the contexts in order, or errno; kept
 *   rdma_free K   rdma_free_devices of the K-th list that `rdma_get` returned
 *   ibv_list      ibv_get_device_list, the names only, then freed
 *   devices       what rdma-core's ibv_devices prints (text, not JSON): the two
 *                 header lines and one line per device; on a NULL list the
 *                 perror line on stderr and exit status 1
 *   rename P Q    rename(2) P to Q, paths relative to $STATIC_PROBE_ROOT (the tree's
 *                 root), as probe.py's {"op": "rename", "path": P, "to": Q}
 *   remove P      unlink(2) P (a file or a link), as probe.py's "remove"
 *
 * Device and context identity is reported as labels: d0, d1... for the same
 * struct ibv_device * (one numbering for list, another for rdma_get, as the two
 * Python probes number them), c0, c1... for the same struct ibv_context *.
 *
 * Compiled with -DPROBE_NO_IBV_CALL the program never names ibv_get_device_list
 * (list, ibv_list and devices are then refused with exit status 2): only
 * rdma_get_devices reaches libibverbs' device list.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define MAX_LISTS 256
#define MAX_LABELS 4096

struct labels {
	const void *seen[MAX_LABELS];
	int count;
};

static struct labels list_devices, cm_devices, cm_contexts;
static struct ibv_device **lists[MAX_LISTS];
static int nlists;
static struct ibv_context **cm_lists[MAX_LISTS];
static int ncm_lists;

static void die(const char *what)
{
	fprintf(stderr, "static_probe: %s\n", what);
	exit(2);
}

static int label_of(struct labels *l, const void *p)
{
	for (int i = 0; i < l->count; i++)
		if (l->seen[i] == p)
			return i;
	if (l->count == MAX_LABELS)
		die("too many labels");
	l->seen[l->count] = p;
	return l->count++;
}

/* Length of the well-formed UTF-8 sequence at s (n bytes left), 0 if there is none
 * (the rules of Python's strict decoder: no overlong forms, no surrogates, nothing
 * above U+10FFFF); *cp receives the code point. */
static int utf8_seq(const unsigned char *s, size_t n, uint32_t *cp)
{
	uint32_t c = s[0];
	int len;
	uint32_t min;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		min = 0x80;
		c &= 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		min = 0x800;
		c &= 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		min = 0x10000;
		c &= 0x07;
	} else {
		return 0;
	}
	if ((size_t)len > n)
		return 0;
	for (int i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

/* A C string as a JSON string, as Python's json.dumps writes os.fsdecode(s):
 * bytes that are not UTF-8 become U+DC80+byte (surrogateescape). */
static void put_json_string(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n = strlen(str);

	putchar('"');
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		int len = utf8_seq(s + i, n - i, &cp);

		if (len == 0) {
			printf("\\u%04x", 0xdc00 | s[i]);
			i++;
			continue;
		}
		i += len;
		if (cp == '"' || cp == '\\')
			printf("\\%c", (int)cp);
		else if (cp == '\n')
			fputs("\\n", stdout);
		else if (cp == '\r')
			fputs("\\r", stdout);
		else if (cp == '\t')
			fputs("\\t", stdout);
		else if (cp == '\b')
			fputs("\\b", stdout);
		else if (cp == '\f')
			fputs("\\f", stdout);
		else if (cp < 0x20 || (cp >= 0x7f && cp < 0x10000))
			printf("\\u%04x", cp);
		else if (cp >= 0x10000)
			printf("\\u%04x\\u%04x", 0xd800 + ((cp - 0x10000) >> 10),
			       0xdc00 + ((cp - 0x10000) & 0x3ff));
		else
			putchar((int)cp);
	}
	putchar('"');
}

/* ibv_get_device_guid gives the GUID in network order; the probes print it as
 * one big-endian number. */
static unsigned long long guid_of(struct ibv_device *dev)
{
	return (unsigned long long)be64toh(ibv_get_device_guid(dev));
}

/* P below $STATIC_PROBE_ROOT. */
static const char *tree_path(const char *rel, char *buf, size_t size)
{
	const char *root = getenv("STATIC_PROBE_ROOT");

	if (!rel || !root)
		die("rename/remove need a path and STATIC_PROBE_ROOT");
	if ((size_t)snprintf(buf, size, "%s/%s", root, rel) >= size)
		die("path too long");
	return buf;
}

static void op_rename(const char *from, const char *to)
{
	char a[4096], b[4096];

	if (rename(tree_path(from, a, sizeof(a)), tree_path(to, b, sizeof(b))))
		die("rename failed");
	puts("{\"op\": \"rename\"}");
}

static void op_remove(const char *rel)
{
	char a[4096];

	if (unlink(tree_path(rel, a, sizeof(a))))
		die("remove failed");
	puts("{\"op\": \"remove\"}");
}

static int list_index(const char *arg, int count)
{
	char *end;
	long k;

	if (!arg)
		die("free needs a list number");
	k = strtol(arg, &end, 10);
	if (*end || k < 0 || k >= count)
		die("no such list");
	return (int)k;
}

#ifndef PROBE_NO_IBV_CALL
/* ibv_get_device_list; on NULL, errno printed with on_error's format. */
static struct ibv_device **get_list(int *num, const char *on_error)
{
	struct ibv_device **devs;

	*num = -1;
	errno = 0;
	devs = ibv_get_device_list(num);
	if (!devs)
		printf(on_error, errno);
	return devs;
}

static void op_list(void)
{
	int num;
	struct ibv_device **devs = get_list(&num, "{\"errno\": %d, \"op\": \"list\"}\n");

	if (!devs)
		return;
	if (nlists == MAX_LISTS)
		die("too many lists");
	lists[nlists++] = devs;
	fputs("{\"devices\": [", stdout);
	for (int i = 0; i < num; i++) {
		struct ibv_device *d = devs[i];

		fputs(i ? ", {\"dev_name\": " : "{\"dev_name\": ", stdout);
		put_json_string(d->dev_name);
		fputs(", \"dev_path\": ", stdout);
		put_json_string(d->dev_path);
		printf(", \"guid\": \"%016llx\", \"ibdev_path\": ", guid_of(d));
		put_json_string(d->ibdev_path);
		printf(", \"id\": \"d%d\", \"index\": %d, \"name\": ", label_of(&list_devices, d),
		       ibv_get_device_index(d));
		put_json_string(ibv_get_device_name(d));
		printf(", \"node_type\": %d, \"transport_type\": %d}", (int)d->node_type,
		       (int)d->transport_type);
	}
	if (devs[num])
		die("device list not NULL-terminated at num");
	fputs("], \"op\": \"list\"}\n", stdout);
}

static void op_ibv_list(void)
{
	int num;
	struct ibv_device **devs = get_list(&num, "{\"op\": \"ibv_list\", \"result\": %d}\n");

	if (!devs)
		return;
	fputs("{\"op\": \"ibv_list\", \"result\": [", stdout);
	for (int i = 0; i < num; i++) {
		if (i)
			fputs(", ", stdout);
		put_json_string(devs[i]->name);
	}
	fputs("]}\n", stdout);
	ibv_free_device_list(devs);
}

/* The output of ibv_devices, format for format. */
static void op_devices(void)
{
	int num;
	struct ibv_device **devs = ibv_get_device_list(&num);

	if (!devs) {
		perror("Failed to get IB devices list");
		exit(1);
	}
	printf("    %-16s\t   node GUID\n", "device");
	printf("    %-16s\t----------------\n", "------");
	for (int i = 0; i < num; i++)
		printf("    %-16s\t%016llx\n", ibv_get_device_name(devs[i]), guid_of(devs[i]));
	ibv_free_device_list(devs);
}
#else
static void op_list(void)
{
	die("built with PROBE_NO_IBV_CALL: no list");
}

static void op_ibv_list(void)
{
	die("built with PROBE_NO_IBV_CALL: no ibv_list");
}

static void op_devices(void)
{
	die("built with PROBE_NO_IBV_CALL: no devices");
}
#endif

static void op_rdma_get(void)
{
	int num = -1;
	struct ibv_context **ctxs;

	errno = 0;
	ctxs = rdma_get_devices(&num);
	if (!ctxs) {
		if (num != 0)
			die("rdma_get_devices: NULL but *num != 0");
		printf("{\"errno\": %d, \"op\": \"rdma_get\"}\n", errno);
		return;
	}
	if (ncm_lists == MAX_LISTS)
		die("too many lists");
	cm_lists[ncm_lists++] = ctxs;
	fputs("{\"contexts\": [", stdout);
	for (int i = 0; i < num; i++) {
		struct ibv_device *d = ctxs[i]->device;

		printf("%s{\"ctx\": \"c%d\", \"dev\": \"d%d\", \"guid\": \"%016llx\", \"name\": ",
		       i ? ", " : "", label_of(&cm_contexts, ctxs[i]), label_of(&cm_devices, d),
		       guid_of(d));
		put_json_string(d->name);
		putchar('}');
	}
	if (ctxs[num])
		die("rdma_get_devices list not NULL-terminated at num");
	fputs("], \"op\": \"rdma_get\"}\n", stdout);
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *op = argv[i];

		if (!strcmp(op, "list")) {
			op_list();
		} else if (!strcmp(op, "free")) {
			int k = list_index(argv[++i], nlists);

			ibv_free_device_list(lists[k]);
			puts("{\"op\": \"free\"}");
		} else if (!strcmp(op, "rdma_get")) {
			op_rdma_get();
		} else if (!strcmp(op, "rdma_free")) {
			int k = list_index(argv[++i], ncm_lists);

			rdma_free_devices(cm_lists[k]);
			puts("{\"op\": \"rdma_free\"}");
		} else if (!strcmp(op, "ibv_list")) {
			op_ibv_list();
		} else if (!strcmp(op, "devices")) {
			op_devices();
		} else if (!strcmp(op, "rename")) {
			op_rename(argv[i + 1], i + 2 < argc ? argv[i + 2] : NULL);
			i += 2;
		} else if (!strcmp(op, "remove")) {
			op_remove(argv[++i]);
		} else {
			die("unknown operation");
		}
		fflush(stdout);
	}
	return 0;
}
