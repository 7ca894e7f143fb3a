// The training loss: torch.nn.CrossEntropyLoss(label_smoothing=) on class indices or on probability targets.
#pragma once

#include <torch/types.h>

namespace ddp {

// The mean loss of `out` (float32 [B, C]: logits, or log-probabilities when `log_probs`) against `labels` (int64 [B])
// or, where defined, `targets` (float32 [B, C] class probabilities: a mixed batch's). Probability targets get
// PyTorch's soft-target cross entropy: targets * (1 - ls) + ls / C, then the mean over the batch of
// -sum(targets * log_softmax(out)). On log-probabilities log_softmax leaves them unchanged, so the loss is the same;
// without smoothing and targets it is nll_loss on them.
torch::Tensor training_loss(const torch::Tensor& out, const torch::Tensor& labels, const torch::Tensor& targets,
                            double label_smoothing, bool log_probs);

// The samples whose top output is their label, or where `targets` is defined its dominant class (argmax, as
// torchvision's references/classification/utils.accuracy reads 2-D targets). int64 [].
torch::Tensor training_correct(const torch::Tensor& out, const torch::Tensor& labels, const torch::Tensor& targets);

}  // namespace ddp
