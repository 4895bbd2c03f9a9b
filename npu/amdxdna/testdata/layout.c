/* Prints the ioctl numbers and struct layouts the C compiler gives for the
 * uapi definitions the Go code mirrors. The structs are copied from
 * include/uapi/drm/drm.h (struct drm_version) and
 * include/uapi/drm/amdxdna_accel.h; DRM_IOWR is _IOWR('d', nr, type) and
 * DRM_COMMAND_BASE is 0x40. Built and run by TestLayoutMatchesC. */
#include <linux/ioctl.h>
#include <linux/types.h>
#include <stddef.h>
#include <stdio.h>

struct drm_version {
	int version_major;
	int version_minor;
	int version_patchlevel;
	__kernel_size_t name_len;
	char *name;
	__kernel_size_t date_len;
	char *date;
	__kernel_size_t desc_len;
	char *desc;
};

struct amdxdna_drm_get_info {
	__u32 param;
	__u32 buffer_size;
	__u64 buffer;
};

struct amdxdna_drm_query_aie_version { __u32 major; __u32 minor; };
struct amdxdna_drm_query_aie_tile_metadata {
	__u16 row_count, row_start, dma_channel_count, lock_count, event_reg_count, pad[3];
};
struct amdxdna_drm_query_aie_metadata {
	__u32 col_size;
	__u16 cols;
	__u16 rows;
	struct amdxdna_drm_query_aie_version version;
	struct amdxdna_drm_query_aie_tile_metadata core, mem, shim;
};

int main(void) {
	printf("version %#lx\n", (unsigned long)_IOWR('d', 0x00, struct drm_version));
	printf("get_info %#lx\n", (unsigned long)_IOWR('d', 0x40 + 7, struct amdxdna_drm_get_info));
	printf("drm_version size %zu name_len %zu name %zu date_len %zu date %zu desc_len %zu desc %zu\n",
	       sizeof(struct drm_version), offsetof(struct drm_version, name_len), offsetof(struct drm_version, name),
	       offsetof(struct drm_version, date_len), offsetof(struct drm_version, date),
	       offsetof(struct drm_version, desc_len), offsetof(struct drm_version, desc));
	printf("get_info size %zu buffer %zu\n", sizeof(struct amdxdna_drm_get_info), offsetof(struct amdxdna_drm_get_info, buffer));
	printf("aie_metadata size %zu cols %zu rows %zu version %zu\n", sizeof(struct amdxdna_drm_query_aie_metadata),
	       offsetof(struct amdxdna_drm_query_aie_metadata, cols), offsetof(struct amdxdna_drm_query_aie_metadata, rows),
	       offsetof(struct amdxdna_drm_query_aie_metadata, version));
	return 0;
}
