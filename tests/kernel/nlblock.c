/* LD_PRELOAD interposer that makes RDMA netlink fail the ways libibverbs handles,
 * for the same process whatever its language (libnl in libibverbs, Python's _socket).
 *
 * SV_NLBLOCK (read at every call, so a process can switch it):
 *   socket   socket(AF_NETLINK, *, NETLINK_RDMA) fails with EPROTONOSUPPORT, which is
 *            what a kernel without ib_core answers;
 *   dump     an RDMA_NLDEV_CMD_GET request is sent with an invalid op, so the kernel
 *            answers the dump with an error (NLMSG_ERROR -EINVAL);
 *   chardev  the same for RDMA_NLDEV_CMD_GET_CHARDEV requests.
 * Anything else (or unset): no change.  Only NETLINK_RDMA sockets are touched.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <linux/netlink.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

#ifndef NETLINK_RDMA
#define NETLINK_RDMA 20
#endif
#define NLDEV_CLIENT 5
#define OP_GET 1
#define OP_GET_CHARDEV 15
#define OP_INVALID 1023

static const char *mode(void)
{
	const char *m = getenv("SV_NLBLOCK");
	return m ? m : "";
}

static int is_rdma_nl(int fd)
{
	int domain = 0, proto = 0;
	socklen_t len = sizeof(domain);

	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) || domain != AF_NETLINK)
		return 0;
	len = sizeof(proto);
	if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len))
		return 0;
	return proto == NETLINK_RDMA;
}

/* Rewrite the op of every matching message in buf (a copy). */
static void rewrite(unsigned char *buf, size_t len)
{
	int op;
	size_t off = 0;

	if (!strcmp(mode(), "dump"))
		op = OP_GET;
	else if (!strcmp(mode(), "chardev"))
		op = OP_GET_CHARDEV;
	else
		return;
	while (off + sizeof(struct nlmsghdr) <= len) {
		struct nlmsghdr h;

		memcpy(&h, buf + off, sizeof(h));
		if (h.nlmsg_len < sizeof(h) || h.nlmsg_len > len - off)
			break;
		if (h.nlmsg_type == ((NLDEV_CLIENT << 10) + op)) {
			h.nlmsg_type = (NLDEV_CLIENT << 10) + OP_INVALID;
			memcpy(buf + off, &h, sizeof(h));
		}
		off += NLMSG_ALIGN(h.nlmsg_len);
	}
}

int socket(int domain, int type, int protocol)
{
	static int (*real)(int, int, int);

	if (!real)
		real = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
	if (domain == AF_NETLINK && protocol == NETLINK_RDMA && !strcmp(mode(), "socket")) {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	return real(domain, type, protocol);
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags,
	       const struct sockaddr *addr, socklen_t alen)
{
	static ssize_t (*real)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
	unsigned char *copy;
	ssize_t ret;

	if (!real)
		real = (ssize_t (*)(int, const void *, size_t, int, const struct sockaddr *,
				    socklen_t))dlsym(RTLD_NEXT, "sendto");
	if (!*mode() || !is_rdma_nl(fd) || !(copy = malloc(len ? len : 1)))
		return real(fd, buf, len, flags, addr, alen);
	memcpy(copy, buf, len);
	rewrite(copy, len);
	ret = real(fd, copy, len, flags, addr, alen);
	free(copy);
	return ret;
}

ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	return sendto(fd, buf, len, flags, NULL, 0);
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	static ssize_t (*real)(int, const struct msghdr *, int);
	struct msghdr m;
	struct iovec iov;
	unsigned char *copy;
	size_t len = 0, off = 0, i;
	ssize_t ret;

	if (!real)
		real = (ssize_t (*)(int, const struct msghdr *, int))dlsym(RTLD_NEXT, "sendmsg");
	if (!*mode() || !is_rdma_nl(fd))
		return real(fd, msg, flags);
	for (i = 0; i < msg->msg_iovlen; i++)
		len += msg->msg_iov[i].iov_len;
	copy = malloc(len ? len : 1);
	if (!copy)
		return real(fd, msg, flags);
	for (i = 0; i < msg->msg_iovlen; i++) {
		memcpy(copy + off, msg->msg_iov[i].iov_base, msg->msg_iov[i].iov_len);
		off += msg->msg_iov[i].iov_len;
	}
	rewrite(copy, len);
	m = *msg;
	iov.iov_base = copy;
	iov.iov_len = len;
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	ret = real(fd, &m, flags);
	free(copy);
	return ret;
}
