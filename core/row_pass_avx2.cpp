// rowPass's body compiled for AVX2 and FMA (see core/CMakeLists.txt); core/row_pass.cpp calls it
// only on a processor that has them.
#include "core/row_kernels.h"

namespace relulens::core {

RowPassOutput rowPassAvx2(const RowPassInput& in) {
    return rows::rowPassAnyRule(in);
}

}  // namespace relulens::core
